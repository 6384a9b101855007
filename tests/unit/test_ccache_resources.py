import pytest

from builder.caches.ccache import CacheStats, config_text, parse_location, parse_print_stats, remote_key, stats_delta
from builder.errors import ConfigError
from builder.resources import available_memory_gib, default_jobs
from builder.source.mirror import parse_submodule_status

PRINT_STATS = ("direct_cache_hit\t57\npreprocessed_cache_hit\t1\ncache_miss\t2\n"
               "remote_storage_hit\t0\nstats_zeroed_timestamp\t0\n")


def test_parse_print_stats_and_delta():
    before = parse_print_stats("direct_cache_hit\t7\ncache_miss\t60\n")
    after = parse_print_stats(PRINT_STATS)
    delta = stats_delta(before, after)
    assert delta == CacheStats(direct_hits=50, preprocessed_hits=1, misses=0)
    assert delta.hit_rate == 1.0
    assert CacheStats(direct_hits=9, misses=1).hit_rate == pytest.approx(0.9)
    assert CacheStats().hit_rate == 0.0 and CacheStats().summary() == "no compiler calls"


def test_config_text_shares_across_paths_and_users():
    text = config_text("5G", "string:gcc-12=1", "redis://127.0.0.1:6379")
    assert "base_dir = /src" in text and "hash_dir = false" in text and "umask = 002" in text
    assert "compiler_check = string:gcc-12=1" in text
    assert "remote_storage = redis://127.0.0.1:6379" in text


def test_remote_key_by_version():
    assert remote_key("4.7.5") == "remote_storage"
    assert remote_key("4.6.1") == "secondary_storage"


def test_parse_location():
    assert parse_location("volume:team-cache").kind == "volume"
    assert parse_location("path:/srv/ccache").value == "/srv/ccache"
    for bad in ("team-cache", "path:relative", "s3:bucket"):
        with pytest.raises(ConfigError):
            parse_location(bad)


@pytest.mark.parametrize("cores,mem,per_job,expected", [(2, 24, 2, 2), (16, 8, 2, 4), (8, 1, 2, 1), (4, 0, 2, 4)])
def test_jobs_matched_to_cores_and_memory(cores, mem, per_job, expected):
    assert default_jobs(cores, mem, per_job) == expected


def test_available_memory_reads_meminfo():
    assert available_memory_gib("MemTotal: 100 kB\nMemAvailable:   8388608 kB\n") == 8.0


def test_parse_submodule_status():
    text = f" {'a' * 40} third_party/fmt (v1.0)\n+{'b' * 40} third_party/x\n"
    assert parse_submodule_status(text) == {"third_party/fmt": "a" * 40, "third_party/x": "b" * 40}
