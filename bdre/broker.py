"""The embedded broker: kombu's filesystem transport, made safe for several processes.

``CELERY_BROKER_URL=filesystem://`` (the default) runs on this transport: settings name it in
``CELERY_BROKER_TRANSPORT``. It keeps kombu's folders, file names and options and fixes the
two races that make kombu's own filesystem transport (5.7) crash workers and lose messages as
soon as more than one process uses the folders, which every worker, Beat and the web do:

* kombu creates a message file and then writes it, so a consumer polling the folder can take
  the file while it is still empty and die of a JSONDecodeError ("Unrecoverable error"). Here
  a message is written under a hidden name and then renamed into the queue folder: a rename is
  atomic, so a consumer sees a whole message or none.
* kombu deletes a message when it reads it and keeps it in the consumer's memory until the ack,
  so a consumer killed before its ack (SIGKILL, OOM, a power cut) loses it, and with it the
  guarantee of ``acks_late``. Here a read renames the message into the consumer's own folder
  (of two consumers racing for a file, only one rename succeeds); the ack deletes it; a reject
  or a clean shutdown renames it back. A consumer holds an exclusive ``flock`` on a file in
  its folder for as long as it lives, and the kernel drops the lock when the process dies,
  however it dies. Another consumer that gets the lock therefore knows for sure that the owner
  is dead, and puts its messages back at the head of their queue. No timeout guesses at death:
  a Spark step of hours is never delivered twice while its worker lives (a visibility timeout
  would), and the message of a dead worker is back within a second or so.

One host (or a file system with working ``flock`` and ``rename``, which excludes most network
file systems); the unacked and the queue folders must be on the same file system.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import shutil
import socket
import tempfile
import time
import uuid
import weakref
from queue import Empty

from kombu.exceptions import ChannelError
from kombu.transport import filesystem, virtual
from kombu.utils.encoding import bytes_to_str, str_to_bytes
from kombu.utils.json import dumps, loads

log = logging.getLogger(__name__)

LOCK = "owner.lock"


def _queue_of(name: str) -> str | None:
    """The queue of a message file (kombu's names: ``<time>_<uuid>.<queue>.msg``); None for
    anything else, such as the hidden files of a publish in progress."""
    if name.startswith(".") or not name.endswith(".msg"):
        return None
    return name.partition(".")[2][: -len(".msg")]


def _table(data: bytes) -> list[filesystem.exchange_queue_t]:
    """An exchange's bindings as read from its file. Empty while the process that created the
    file waits for its lock; a writer killed between its write and its truncate leaves the
    tail of a longer table after the new one, which is ignored."""
    text = bytes_to_str(data).strip()
    if not text:
        return []
    return [filesystem.exchange_queue_t(*q) for q in json.JSONDecoder().raw_decode(text)[0]]


def _give_back(path: str, queue_folder: str) -> bool:
    """Return an unacknowledged message to the head of its queue (it keeps its name, which
    sorts by publish time), marked redelivered as Redis marks it. The mark is written under a
    hidden name and renamed over the file before the file moves, so that whatever moment this
    process dies at, the message is in exactly one place, whole."""
    name = os.path.basename(path)
    try:
        with open(path, "rb") as f:
            payload = loads(bytes_to_str(f.read()))
        payload["headers"]["redelivered"] = True
        payload["properties"]["delivery_info"]["redelivered"] = True
    except FileNotFoundError:
        return False  # another process gave it back first
    except (ValueError, KeyError, TypeError):
        pass  # moved as it is: the reader sets it aside
    else:
        hidden = os.path.join(os.path.dirname(path), f".{name}.{uuid.uuid4().hex}")
        with open(hidden, "wb") as f:
            f.write(str_to_bytes(dumps(payload)))
        os.replace(hidden, path)
    try:
        os.rename(path, os.path.join(queue_folder, name))
    except FileNotFoundError:
        return False
    return True


def _remove(folder: str) -> None:
    """Drop a consumer's folder once its messages are back: its lock and whatever hidden
    file a give-back cut short left."""
    with contextlib.suppress(OSError):
        for name in os.listdir(folder):
            if name == LOCK or name.startswith("."):
                os.unlink(os.path.join(folder, name))
        os.rmdir(folder)


def restore_dead_consumers(root: str, queue_folder: str, own: str | None = None) -> int:
    """Put back every message read by a consumer that died before settling it."""
    try:
        names = os.listdir(root)
    except FileNotFoundError:
        return 0
    restored = 0
    for name in names:
        folder = os.path.join(root, name)
        if name.startswith(".") or folder == own:  # hidden: a consumer being set up
            continue
        try:
            fd = os.open(os.path.join(folder, LOCK), os.O_RDWR | os.O_CLOEXEC)
        except OSError:
            continue  # removed meanwhile, by its owner or by another consumer
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue  # its owner is alive
            try:
                files = os.listdir(folder)
            except FileNotFoundError:
                continue
            for msg in files:
                if _queue_of(msg) is not None:
                    restored += _give_back(os.path.join(folder, msg), queue_folder)
            _remove(folder)
        finally:
            os.close(fd)
    if restored:
        log.warning("restored %s unacknowledged messages of dead consumers", restored)
    return restored


class Unacked:
    """The folder of the messages this consumer process has read and not yet settled, with
    the lock that tells the others it is alive. Made on the first read: producers have none."""

    def __init__(self, root: str):
        self.root = root
        self.folder: str | None = None
        self.files: dict[str, str] = {}  # delivery tag -> its file in the folder
        self.inherited = False
        self._fd: int | None = None
        _all.add(self)

    def open(self) -> str:
        if self.folder is None:
            os.makedirs(self.root, exist_ok=True)
            # Locked under a hidden name, then renamed into view: nobody ever sees the folder
            # of a live consumer without its lock held.
            staging = tempfile.mkdtemp(prefix=".new-", dir=self.root)
            fd = os.open(os.path.join(staging, LOCK), os.O_CREAT | os.O_RDWR | os.O_CLOEXEC, 0o600)
            fcntl.flock(fd, fcntl.LOCK_EX)
            name = f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
            os.rename(staging, os.path.join(self.root, name))
            self.folder, self._fd = os.path.join(self.root, name), fd
        return self.folder

    def close(self, queue_folder: str) -> None:
        """A clean end: whatever was not settled goes back, then the folder and the lock."""
        if self.folder is None:
            return
        for msg in os.listdir(self.folder):
            if _queue_of(msg) is not None:
                _give_back(os.path.join(self.folder, msg), queue_folder)
        _remove(self.folder)
        self._release()

    def after_fork(self) -> None:
        """A forked child (a pool process) shares its parent's lock: flock belongs to the
        open file. Its copy of the descriptor must go, or the parent's messages would not come
        back until the child died too; the messages are the parent's to settle, not its."""
        if self.folder is not None:
            self.inherited = True
        self._release()

    def _release(self) -> None:
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
        self.folder, self._fd, self.files = None, None, {}


_all: weakref.WeakSet[Unacked] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for unacked in list(_all):
        unacked.after_fork()


os.register_at_fork(after_in_child=_after_fork_in_child)


class QoS(virtual.QoS):
    def ack(self, delivery_tag):
        self.channel._settle(delivery_tag)
        super().ack(delivery_tag)

    def reject(self, delivery_tag, requeue=False):
        if not requeue:  # with requeue, the base class gives it back through _restore
            self.channel._settle(delivery_tag)
        super().reject(delivery_tag, requeue=requeue)


class Channel(filesystem.Channel):
    QoS = QoS

    def __init__(self, connection, **kwargs):
        super().__init__(connection, **kwargs)
        self._unacked: Unacked = connection.unacked
        self._no_ack: set[str] = set()

    def basic_consume(self, queue, no_ack, *args, **kwargs):
        # Messages taken without ack (Celery's remote control) are never settled: deleted
        # when read.
        if no_ack:
            self._no_ack.add(queue)
        return super().basic_consume(queue, no_ack, *args, **kwargs)

    def basic_get(self, queue, no_ack=False, **kwargs):
        message = super().basic_get(queue, no_ack=no_ack, **kwargs)
        if message is not None and no_ack:
            self._settle(message.delivery_tag)
        return message

    # kombu opens an exchange's table with "wb" (truncating it) before it takes the lock, so
    # a worker that starts while another binds its queues reads an empty file and dies, or two
    # workers starting together overwrite each other's bindings and messages to the lost
    # queue go nowhere. Here the file is never truncated before the lock is held.

    def get_table(self, exchange):
        try:
            with open(self._exchange_file(exchange), "rb") as f:
                fcntl.flock(f, fcntl.LOCK_SH)
                return _table(f.read())
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise ChannelError(f"Cannot read the bindings of {exchange!r}") from exc

    def _update_table(self, exchange, change) -> None:
        file = self._exchange_file(exchange)
        self.control_folder.mkdir(parents=True, exist_ok=True)
        with open(os.open(file, os.O_RDWR | os.O_CREAT, 0o644), "rb+", buffering=0) as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            queues = _table(f.read())
            changed = change(list(queues))
            if changed != queues:
                f.seek(0)
                f.write(str_to_bytes(dumps(changed)))
                f.truncate()

    def _queue_bind(self, exchange, routing_key, pattern, queue):
        binding = filesystem.exchange_queue_t(routing_key or "", pattern or "", queue or "")
        self._update_table(exchange, lambda qs: qs if binding in qs else [binding, *qs])

    def _delete(self, queue, exchange, routing_key, pattern, *args, **kwargs):
        virtual.Channel._delete(self, queue, exchange, routing_key, pattern, *args, **kwargs)
        binding = filesystem.exchange_queue_t(routing_key or "", pattern or "", queue or "")
        self._update_table(exchange, lambda qs: [q for q in qs if q != binding])

    # kombu's filesystem.Channel names the base's `message` argument `payload`: no name
    # satisfies both supertypes (kombu passes it by position).
    def _put(self, queue, payload, **kwargs):  # type: ignore[override]
        # Zero-padded so that names sort by publish time across processes (kombu's monotonic
        # milliseconds do not, after a reboot).
        name = f"{time.time_ns():020d}_{uuid.uuid4().hex}.{queue}.msg"
        hidden = os.path.join(self.data_folder_out, f".{name}")
        try:
            with open(hidden, "xb") as f:
                f.write(str_to_bytes(dumps(payload)))
            os.rename(hidden, os.path.join(self.data_folder_out, name))
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.unlink(hidden)
            raise ChannelError(f"Cannot add {name!r} to {self.data_folder_out}") from exc

    def _get(self, queue, timeout=None):
        # timeout: the base class's signature; kombu polls, and never passes one.
        own = self._unacked.open()
        self.connection.restore_dead_consumers()
        for name in sorted(os.listdir(self.data_folder_in)):
            if _queue_of(name) != queue:
                continue
            path = os.path.join(own, name)
            try:
                os.rename(os.path.join(self.data_folder_in, name), path)
            except FileNotFoundError:
                continue  # another consumer was first
            try:
                with open(path, "rb") as f:
                    payload = loads(bytes_to_str(f.read()))
                tag = payload["properties"]["delivery_tag"]
            except (ValueError, KeyError, TypeError) as exc:
                self._set_aside(path, exc)
                continue
            if queue in self._no_ack:
                os.unlink(path)
            else:
                self._unacked.files[tag] = path
            return payload
        raise Empty()

    def _set_aside(self, path: str, exc: Exception) -> None:
        """A file that is no message (a half-written file of a kombu producer, or a power cut
        before the disk had it) must not kill the worker: it is kept for a human to read."""
        os.makedirs(self.bad_folder, exist_ok=True)
        shutil.move(path, os.path.join(self.bad_folder, os.path.basename(path)))
        log.error("broker file %s is not a message (%s): moved to %s", path, exc, self.bad_folder)

    def _settle(self, delivery_tag) -> None:
        path = self._unacked.files.pop(delivery_tag, None)
        if path is None:
            return
        with contextlib.suppress(FileNotFoundError):
            if self.store_processed:
                os.replace(path, os.path.join(self.processed_folder, os.path.basename(path)))
            else:
                os.unlink(path)

    def _restore(self, message):
        path = self._unacked.files.pop(message.delivery_tag, None)
        if path is not None:
            _give_back(path, self.data_folder_in)
        elif not self._unacked.inherited:  # a forked child leaves its parent's messages be
            super()._restore(message)

    def _purge(self, queue):
        # The messages of dead consumers are ready again: they go with the others.
        self.connection.restore_dead_consumers(force=True)
        return super()._purge(queue)

    def _size(self, queue):
        self.connection.restore_dead_consumers(force=True)
        return super()._size(queue)

    @property
    def bad_folder(self) -> str:
        return self.transport_options.get("bad_folder") or os.path.join(self.data_folder_in, ".bad")


class Transport(filesystem.Transport):
    """kombu's filesystem transport with atomic publishes and acknowledgements that survive
    the death of the consumer. Extra transport options: ``unacked_folder`` (default: a hidden
    folder in the queue folder), ``bad_folder``, ``dead_consumer_check_seconds`` (1)."""

    Channel = Channel

    def __init__(self, client, **kwargs):
        super().__init__(client, **kwargs)
        options = client.transport_options
        self.queue_folder = options.get("data_folder_in", "data_in")
        self.unacked = Unacked(
            options.get("unacked_folder") or os.path.join(self.queue_folder, ".unacked")
        )
        self.check_every = float(options.get("dead_consumer_check_seconds", 1.0))
        self._checked_at = float("-inf")

    def restore_dead_consumers(self, force: bool = False) -> int:
        now = time.monotonic()
        if not force and now - self._checked_at < self.check_every:
            return 0
        self._checked_at = now
        return restore_dead_consumers(self.unacked.root, self.queue_folder, self.unacked.folder)

    def close_connection(self, connection):
        super().close_connection(connection)  # the channels give their unacked messages back
        self.unacked.close(self.queue_folder)
