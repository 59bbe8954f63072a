"""A one-thread executor whose worker is a daemon thread, for blocking calls that may hang.

Use it with ``loop.run_in_executor(executor, fn)`` for a driver or library call that is fast
until it is not (NVML when a GPU falls off the bus blocks in the kernel): calls run one at a
time, in order, always on the same thread (libraries with thread affinity stay happy), and a
call that never returns cannot block interpreter exit.
"""

from __future__ import annotations

import concurrent.futures
import queue
import threading

from optui.adapters.thread_names import set_native_thread_name


class SingleThreadExecutor(concurrent.futures.Executor):
    """One daemon worker thread running submitted calls in order.

    Not ``ThreadPoolExecutor``: its workers are joined at interpreter exit, so a call stuck in
    the driver would hang ``optui``'s exit forever."""

    def __init__(self, name: str) -> None:
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._work, name=name, daemon=True)
        self._lock = threading.Lock()
        self._started = False
        self._shut = False

    def submit(self, fn, /, *args, **kwargs) -> concurrent.futures.Future:
        with self._lock:
            if self._shut:
                raise RuntimeError("executor is shut down")
            future: concurrent.futures.Future = concurrent.futures.Future()
            self._queue.put((future, fn, args, kwargs))
            if not self._started:
                self._started = True
                self._thread.start()
        return future

    def is_worker(self, thread: threading.Thread) -> bool:
        """True when ``thread`` is this executor's worker."""
        return thread is self._thread

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """Refuse new calls; queued calls still run unless ``cancel_futures``. ``wait`` joins the
        thread with no timeout: pass ``wait=False`` when a call may be stuck, and wait on a
        future with a timeout instead."""
        with self._lock:
            if self._shut:
                return
            self._shut = True
            if cancel_futures:
                while True:
                    try:
                        item = self._queue.get_nowait()
                    except queue.Empty:
                        break
                    item[0].cancel()
            self._queue.put(None)
        if wait and self._started:
            self._thread.join()

    def _work(self) -> None:
        set_native_thread_name(self._thread.name)  # ``top -H`` shows it
        while (item := self._queue.get()) is not None:
            future, fn, args, kwargs = item
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(fn(*args, **kwargs))
            except BaseException as exc:  # noqa: BLE001 - delivered to the waiting caller
                future.set_exception(exc)
