"""WebShop catalogs are shared while envs use them and freed when the last one closes (docs/environments.md §5.1)."""

from __future__ import annotations

import gc
import sys
import weakref

import pytest

from envs_bridge.base import EnvError
from envs_bridge.launcher import ServerProcess
from envs_bridge.transport import JsonConnection
from envs_bridge.webshop import adapter as webshop
from envs_bridge.webshop.adapter import WebShopAdapter


def test_envs_share_a_world_and_the_last_to_close_frees_it():
    first, second = WebShopAdapter(num_products=1500), WebShopAdapter(num_products=1500)
    assert first._world is second._world  # one catalog and search index per options, not per env
    world = weakref.ref(first._world)
    first.close()
    assert world() is not None and second.num_tasks("train") > 0
    second.close()
    assert world() is None  # beyond RECENT_MAX_PRODUCTS: nothing keeps it
    with pytest.raises(EnvError, match="closed"):
        second.reset("train", 0, 0)


def test_only_the_most_recent_small_world_outlives_its_envs():
    envs = [WebShopAdapter(catalog_seed=seed) for seed in (11, 12)]  # the default 1,000 products
    worlds = [weakref.ref(env._world) for env in envs]
    for env in envs:
        env.close()
    gc.collect()
    assert worlds[0]() is None and worlds[1]() is not None  # one kept, so a re-create does not rebuild it
    assert WebShopAdapter(catalog_seed=12)._world is worlds[1]()


def _rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/statm") as file:
        return int(file.read().split()[1]) * 4096 / 2**20


@pytest.mark.slow
@pytest.mark.timeout(300)
def test_a_server_returns_the_memory_of_large_catalogs_on_close():
    process = ServerProcess("webshop", python=sys.executable, max_envs=8)
    connection = JsonConnection(process.start(timeout_s=60))
    try:
        baseline = _rss_mib(process.pid)
        env_ids = []
        for seed in (0, 1):  # two 10,000-product catalogs: ~230 MB
            answer = connection.post("/create", {"count": 2, "options": {"num_products": 10000, "catalog_seed": seed}}, timeout_s=240)
            env_ids += answer["env_ids"]
        loaded = _rss_mib(process.pid)
        assert loaded - baseline > 150, (baseline, loaded)
        connection.post("/close", {"env_ids": env_ids}, timeout_s=60)
        closed = _rss_mib(process.pid)
        assert closed - baseline < 0.25 * (loaded - baseline), (baseline, loaded, closed)
    finally:
        connection.close()
        process.stop()
