"""ctypes binding to MSPTI's activity API (reference ascend-dynamic.md §C.4, §C.5).

- :func:`load_library` finds ``libmspti.so``: an explicit path, ``MSMONITOR_MSPTI_LIB``, the CANN
  install locations, the dynamic loader's search path (a preloaded library is found there), then
  ``ctypes.util.find_library``. Loaded libraries are kept for the life of the process, and so are
  the two ctypes callbacks registered with each: MSPTI may call them until the process ends.
- :class:`BufferPool` hands MSPTI 8 MB buffers, at most 32 outstanding (256 MB, as msMonitor). When
  all are out, a request is declined (``*buffer = NULL``: MSPTI drops records) and counted.
- :class:`MsptiSession` takes the single subscriber slot (``msptiSubscribe`` with a NULL callback,
  like the ``mspti`` Python package), registers the buffer callbacks, enables kinds, flushes, and
  passes each completed buffer to a consumer *inside* the complete callback, so that the strings the
  records point to are copied before the buffer is reused.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import logging
import os
import threading
from typing import Callable, Dict, List, Mapping, Optional

log = logging.getLogger("msmonitor_plugin")

SUCCESS = 0
MAX_LIMIT_REACHED = 3  # also "no more records in this buffer"
RESULTS = {
    0: "SUCCESS",
    1: "ERROR_INVALID_PARAMETER",
    2: "ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED",
    3: "ERROR_MAX_LIMIT_REACHED",
    4: "ERROR_DEVICE_OFFLINE",
    5: "ERROR_QUEUE_EMPTY",
    6: "ERROR_WITHOUT_LD_PRELOAD",
    999: "ERROR_INNER",
}
DEFAULT_BUFFER_BYTES = 8 * 1024 * 1024
DEFAULT_MAX_BUFFERS = 32
CANN_LIB_DIRS = ("/usr/local/Ascend/cann/lib64", "/usr/local/Ascend/ascend-toolkit/latest/lib64")
LIB_NAME = "libmspti.so"

REQUEST_FUNC = ctypes.CFUNCTYPE(
    None, ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(ctypes.c_size_t), ctypes.POINTER(ctypes.c_size_t)
)
COMPLETE_FUNC = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t)

# (view of the buffer, its address, valid bytes) -> None; runs on MSPTI's thread.
Consumer = Callable[[memoryview, int, int], None]


class MsptiError(RuntimeError):
    def __init__(self, message: str, result: Optional[int] = None) -> None:
        super().__init__(message)
        self.result = result


def result_name(result: int) -> str:
    return RESULTS.get(result, f"error {result}")


def candidates(explicit: Optional[str] = None, env: Mapping[str, str] = os.environ) -> List[str]:
    """Where to look for the library, in order (paths that do not exist are left out)."""
    found: List[str] = []
    for path in (explicit, env.get("MSMONITOR_MSPTI_LIB")):
        if path:
            return [path]  # an explicit choice is the only one: never fall back to another library
    for home in (env.get("ASCEND_HOME_PATH"), env.get("ASCEND_TOOLKIT_HOME")):
        if home:
            found.append(os.path.join(home, "lib64", LIB_NAME))
    found.extend(os.path.join(d, LIB_NAME) for d in CANN_LIB_DIRS)
    found = [p for p in found if os.path.exists(p)]
    found.append(LIB_NAME)  # LD_LIBRARY_PATH, the loader cache, or already loaded (LD_PRELOAD)
    return found


_libraries: Dict[str, MsptiLibrary] = {}
_libraries_lock = threading.Lock()


@functools.lru_cache(maxsize=1)
def _found_by_the_system() -> str:
    """``find_library``'s answer, asked once per process: it runs ldconfig, gcc and ld as subprocesses
    (on the link thread), which capped a machine without MSPTI at a few npu-monitor starts a second."""
    return ctypes.util.find_library("mspti") or ""


def load_library(explicit: Optional[str] = None, env: Mapping[str, str] = os.environ) -> MsptiLibrary:
    """The MSPTI library, loaded once per path. Raises MsptiError naming every place tried."""
    tried: List[str] = []
    paths = candidates(explicit, env)
    if len(paths) > 1 or paths == [LIB_NAME]:
        # find_library may run ldconfig: only as the last resort, and only without an explicit choice.
        paths.append(_found_by_the_system())
    with _libraries_lock:
        for path in filter(None, paths):
            if path in _libraries:
                return _libraries[path]
            try:
                cdll = ctypes.CDLL(path)
            except OSError as exc:
                tried.append(f"{path}: {exc}")
                continue
            try:
                lib = _libraries[path] = MsptiLibrary(cdll, path)
            except AttributeError as exc:
                tried.append(f"{path}: not MSPTI ({exc})")
                continue
            return lib
    raise MsptiError("libmspti.so not loadable; tried " + "; ".join(tried))


class BufferPool:
    """Fixed-size buffers for MSPTI, recycled; at most *max_buffers* allocated at once."""

    def __init__(
        self, buffer_bytes: int = DEFAULT_BUFFER_BYTES, max_buffers: int = DEFAULT_MAX_BUFFERS
    ) -> None:
        self.buffer_bytes = buffer_bytes
        self.max_buffers = max_buffers
        self.declined = 0  # requests answered with NULL: MSPTI dropped records
        self._lock = threading.Lock()
        self._owned: Dict[int, ctypes.Array] = {}  # every buffer allocated, by address
        self._views: Dict[int, memoryview] = {}
        self._free: List[int] = []

    def take(self) -> Optional[int]:
        """The address of a free buffer, or None when all are out (counted in :attr:`declined`)."""
        with self._lock:
            if self._free:
                return self._free.pop()
            if len(self._owned) >= self.max_buffers:
                self.declined += 1
                return None
            buf = (ctypes.c_ubyte * self.buffer_bytes)()
            addr = ctypes.addressof(buf)
            self._owned[addr] = buf
            self._views[addr] = memoryview(buf).cast("B")
            return addr

    def view(self, addr: int) -> Optional[memoryview]:
        return self._views.get(addr)

    def give_back(self, addr: int) -> None:
        with self._lock:
            if addr in self._owned and addr not in self._free:
                self._free.append(addr)

    @property
    def outstanding(self) -> int:
        with self._lock:
            return len(self._owned) - len(self._free)


class MsptiLibrary:
    """The loaded library: prototypes, the buffer pool, and the callbacks (alive as long as the process)."""

    def __init__(self, cdll: ctypes.CDLL, path: str) -> None:
        self.path = path
        self.cdll = cdll
        self._subscribe = self._fn(
            "msptiSubscribe", [ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p, ctypes.c_void_p]
        )
        self._unsubscribe = self._fn("msptiUnsubscribe", [ctypes.c_void_p])
        self._register = self._fn("msptiActivityRegisterCallbacks", [REQUEST_FUNC, COMPLETE_FUNC])
        self._enable = self._fn("msptiActivityEnable", [ctypes.c_int])
        self._disable = self._fn("msptiActivityDisable", [ctypes.c_int])
        self._flush_all = self._fn("msptiActivityFlushAll", [ctypes.c_uint32])
        self._next = self._fn(
            "msptiActivityGetNextRecord", [ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_void_p)]
        )
        self._disable_domain = self._optional("msptiActivityDisableMarkerDomain", [ctypes.c_char_p])
        self.pool = BufferPool()
        self.session: Optional[MsptiSession] = None
        self.callback_errors = 0
        # Created once and never released: MSPTI keeps the function pointers after registration.
        self._request_cb = REQUEST_FUNC(self._on_request)
        self._complete_cb = COMPLETE_FUNC(self._on_complete)

    def _fn(self, name: str, argtypes: list) -> Callable[..., int]:
        fn = self.cdll[name]  # item access: a prototype of our own, not the CDLL's shared attribute
        fn.argtypes = argtypes
        fn.restype = ctypes.c_int
        return fn

    def _optional(self, name: str, argtypes: list) -> Optional[Callable[..., int]]:
        try:
            return self._fn(name, argtypes)
        except AttributeError:
            return None

    def _on_request(self, buffer, size, max_records) -> None:  # type: ignore[no-untyped-def]
        try:
            session = self.session
            addr = self.pool.take() if session is not None and session.accepting else None
            buffer[0] = addr
            size[0] = self.pool.buffer_bytes if addr else 0
            max_records[0] = 0  # fill as much as fits
        except Exception:  # never raise into MSPTI's thread
            self.callback_errors += 1

    def _on_complete(self, addr: Optional[int], size: int, valid: int) -> None:
        if not addr:
            return
        try:
            view = self.pool.view(addr)
            session = self.session
            if view is not None and session is not None and valid:
                session.consume(view, addr, min(valid, len(view)))
        except Exception:
            self.callback_errors += 1
            log.exception("MSPTI buffer could not be processed")
        finally:
            self.pool.give_back(addr)

    def record_offsets(self, addr: int, valid: int) -> List[int]:
        """Offsets of the records in a buffer, as ``msptiActivityGetNextRecord`` walks it."""
        record = ctypes.c_void_p(None)
        ref = ctypes.byref(record)
        offsets: List[int] = []
        for _ in range(valid // 8 + 1):  # a bound, in case a library never says "no more"
            result = self._next(addr, valid, ref)
            if result == MAX_LIMIT_REACHED:
                return offsets
            if result != SUCCESS or record.value is None:
                raise MsptiError(f"msptiActivityGetNextRecord: {result_name(result)}", result)
            offsets.append(record.value - addr)
        raise MsptiError("msptiActivityGetNextRecord never reached the end of the buffer")


class MsptiSession:
    """One monitoring session: the subscriber slot, registered buffers, enabled kinds."""

    def __init__(self, lib: MsptiLibrary, consumer: Consumer) -> None:
        self.lib = lib
        self.consumer = consumer
        self.accepting = False
        self._handle = ctypes.c_void_p(None)
        self._lock = threading.Lock()  # complete callbacks may come from several MSPTI threads

    def start(self) -> None:
        if self.lib.session is not None:
            raise MsptiError("this process already runs an MSPTI session")
        result = self.lib._subscribe(ctypes.byref(self._handle), None, None)
        if result != SUCCESS:
            hint = " (another profiler holds MSPTI's only subscriber slot)" if result == 2 else ""
            raise MsptiError(f"msptiSubscribe: {result_name(result)}{hint}", result)
        self.lib.session = self
        self.accepting = True
        result = self.lib._register(self.lib._request_cb, self.lib._complete_cb)
        if result != SUCCESS:
            self.close()
            raise MsptiError(f"msptiActivityRegisterCallbacks: {result_name(result)}", result)

    def enable(self, kind: int) -> int:
        return self.lib._enable(kind)

    def disable(self, kind: int) -> int:
        return self.lib._disable(kind)

    def disable_marker_domain(self, domain: str) -> None:
        if self.lib._disable_domain is not None:
            self.lib._disable_domain(domain.encode())

    def flush(self) -> int:
        """Deliver every buffer MSPTI holds, partially filled ones included, to the consumer."""
        return self.lib._flush_all(1)

    def consume(self, view: memoryview, addr: int, valid: int) -> None:
        with self._lock:
            self.consumer(view, addr, valid)

    def close(self) -> None:
        """Flush, unsubscribe and stop taking buffers; buffers MSPTI returns later are just recycled."""
        if self.lib.session is not self:
            return
        self.lib._flush_all(1)
        self.accepting = False
        self.lib._unsubscribe(self._handle)
        self.lib.session = None
