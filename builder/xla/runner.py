"""The runner `builder xla-check` wraps a script in (``python -c RUNNER SCRIPT ARGS...``).

It wraps ``torch.Tensor``'s host reads and host-to-device ``.to`` to note the user's
file:line (each read with the step it happened in), counts the script's steps (its own
sync barriers, from torch_xla's MarkStep counter minus the syncs MpDeviceLoader issues
itself; and the batches MpDeviceLoader yields), and at exit prints the metrics (every metric's samples, every
counter), those notes and the step clock as JSON on one marker line.
"""

MARKER = "@@builder-xla-check@@"

# Runs inside the container as `python -c RUNNER SCRIPT ARGS...`.
RUNNER = r'''
import atexit, json, os, runpy, sys, threading
script = os.path.abspath(sys.argv[1])
sys.argv = sys.argv[1:]
root = os.path.dirname(script) + os.sep
sys.path.insert(0, os.path.dirname(script))
import torch
import torch_xla
import torch_xla.debug.metrics as met
import torch_xla.distributed.parallel_loader as pl

reads, transfers, loaders = {}, {}, {"count": 0}
clock = {"loader_syncs": 0, "yields": 0, "after": 0}  # MpDeviceLoader's own syncs; its batches (after: exhausted)
guard = threading.local()

def user_site(depth=60):
    frame = sys._getframe(3)  # user_site <- note <- the wrapper <- its caller
    for _ in range(depth):
        if frame is None:
            return None
        if frame.f_code.co_filename.startswith(root):
            return "%s:%d" % (frame.f_code.co_filename, frame.f_lineno)
        frame = frame.f_back
    return None

def note(table, kind, depth=60):
    site = user_site(depth)
    if site:
        kinds = table.setdefault(site, {})
        kinds[kind] = kinds.get(kind, 0) + 1

def note_read(kind):
    site = user_site()
    if site:
        entry = reads.setdefault(site, {"kinds": {}, "at": []})
        entry["kinds"][kind] = entry["kinds"].get(kind, 0) + 1
        if len(entry["at"]) < 100000:
            entry["at"].append([script_syncs(), clock["yields"] + clock["after"]])

def is_xla(tensor):
    try:
        return tensor.device.type == "xla"
    except Exception:
        return False

def wrap_read(name, kind):
    original = getattr(torch.Tensor, name)
    def method(self, *args, **kwargs):
        if getattr(guard, "busy", False) or not is_xla(self):
            return original(self, *args, **kwargs)
        guard.busy = True
        try:
            note_read(kind)
            return original(self, *args, **kwargs)
        finally:
            guard.busy = False
    setattr(torch.Tensor, name, method)

for name, kind in (("item", ".item()"), ("tolist", ".tolist()"), ("numpy", ".numpy()"), ("cpu", ".cpu()"),
                   ("__repr__", "printing a tensor"), ("__format__", "formatting a tensor"),
                   ("__bool__", "a tensor as a condition"), ("__float__", "float(tensor)"),
                   ("__int__", "int(tensor)")):
    wrap_read(name, kind)

original_to = torch.Tensor.to
def to(self, *args, **kwargs):
    out = original_to(self, *args, **kwargs)
    if not getattr(guard, "busy", False):
        try:
            if self.device.type == "cpu" and out.device.type == "xla":
                note(transfers, ".to(device)", depth=1)  # called by the user's code itself, not Module.to
            elif self.device.type == "xla" and out.device.type == "cpu":
                note_read(".to('cpu')")
        except Exception:
            pass
    return out
torch.Tensor.to = to

for cls in (getattr(pl, "ParallelLoader", None), getattr(pl, "MpDeviceLoader", None)):
    if cls is not None:
        init = cls.__init__
        def counted(self, *args, __init=init, **kwargs):
            loaders["count"] += 1
            return __init(self, *args, **kwargs)
        cls.__init__ = counted

# Syncs are counted by torch_xla itself (MarkStep: torch_xla.sync, xm.mark_step and
# xm.optimizer_step all reach it); wrapping sync would put a frame of ours where
# PT_XLA_DEBUG_LEVEL=2 looks for "sync" to name an execution's cause.
def marks():
    return int(met.counter_value("MarkStep") or 0)

def script_syncs():
    return marks() - clock["loader_syncs"]  # MpDeviceLoader's own syncs are not the script's steps

per_device = getattr(pl, "PerDeviceLoader", None)
if per_device is not None:
    loader_next = per_device.next
    def counted_next(self):
        before = marks()
        try:
            item = loader_next(self)
        except StopIteration:
            clock["after"] = 1
            raise
        finally:
            clock["loader_syncs"] += marks() - before
        clock["yields"] += 1
        clock["after"] = 0
        return item
    per_device.next = counted_next

def dump():
    data = {"metrics": {}, "counters": {}, "reads": reads, "transfers": transfers, "loaders": loaders["count"],
            "clock": {"syncs": script_syncs(), "yields": clock["yields"]}}
    try:
        for name in met.metric_names():
            values = met.metric_data(name)
            if values:
                data["metrics"][name] = {"samples": int(values[0]), "accumulator": float(values[1])}
        data["counters"] = {name: int(met.counter_value(name) or 0) for name in met.counter_names()}
    except Exception as exc:
        data["error"] = repr(exc)
    sys.__stdout__.write("@@builder-xla-check@@" + json.dumps(data) + "\n")
    sys.__stdout__.flush()

atexit.register(dump)  # after torch_xla's own handlers: runs before them
runpy.run_path(script, run_name="__main__")
'''
