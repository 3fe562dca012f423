"""BaseService's lifecycle rules, on a service whose hooks only count (pure logic, no servers)."""

from __future__ import annotations

import asyncio
import threading
import warnings

import pytest

from lineage_sdk import BaseService


class Counting(BaseService):
    def __init__(self, *, fail_connects: int = 0, delay: float = 0.0) -> None:
        super().__init__()
        self.connects = 0
        self.closes = 0
        self.fail_connects = fail_connects
        self.delay = delay

    async def _connect(self) -> None:
        self.connects += 1
        await asyncio.sleep(self.delay)
        if self.fail_connects:
            self.fail_connects -= 1
            raise ConnectionError("server unreachable")

    async def _close(self) -> None:
        self.closes += 1
        await asyncio.sleep(self.delay)


async def test_connect_and_close_run_their_hook_once_however_often_and_concurrently_called():
    service = Counting(delay=0.01)
    assert not service.is_connected
    await service.close()
    assert service.closes == 0
    await asyncio.gather(*(service.connect() for _ in range(5)))
    await service.connect()
    assert (service.connects, service.is_connected) == (1, True)
    await asyncio.gather(*(service.close() for _ in range(5)))
    await service.close()
    assert (service.closes, service.is_connected) == (1, False)


async def test_a_closed_service_connects_again_and_async_with_pairs_the_two():
    service = Counting()
    async with service as entered:
        assert entered is service and service.is_connected
    async with service:
        pass
    assert (service.connects, service.closes, service.is_connected) == (2, 2, False)


async def test_a_failed_connect_leaves_it_disconnected_and_the_next_connect_tries_again():
    service = Counting(fail_connects=1)
    with pytest.raises(ConnectionError):
        await service.connect()
    assert not service.is_connected
    await service.close()
    assert service.closes == 0
    await service.connect()
    assert (service.connects, service.is_connected) == (2, True)


async def test_the_sync_forms_refuse_inside_a_running_loop_and_leave_no_coroutine_behind():
    service = Counting()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # "coroutine ... was never awaited" would be an error
        with pytest.raises(RuntimeError, match=r"await connect\(\)"):
            service.connect_sync()
        with pytest.raises(RuntimeError, match=r"await connect\(\)"), service:
            pass
    assert service.connects == 0


def test_the_sync_forms_from_plain_threads_connect_once():
    service = Counting(delay=0.02)
    threads = [threading.Thread(target=service.connect_sync) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert (service.connects, service.is_connected) == (1, True)
    service.close_sync()
    service.close_sync()
    with service:
        assert service.is_connected
    assert (service.connects, service.closes, service.is_connected) == (2, 2, False)
