import os as _os

# Like torch.utils.cmake_prefix_path: find_package(Torch) looks in here.
cmake_prefix_path = _os.path.join(
    _os.path.dirname(_os.path.dirname(_os.path.abspath(__file__))), "share", "cmake"
)
