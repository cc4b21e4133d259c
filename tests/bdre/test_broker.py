"""The embedded broker (``filesystem://``, bdre.broker) with several real producer and
consumer processes: every message is delivered, none twice, no consumer crashes, and a
message whose consumer died before its ack comes back."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path
from queue import Empty

import pytest

from tests.helpers.broker_clients import Clients, ids_in, wait_until


def embedded_env(var: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        {
            "BDRE_VAR_DIR": str(var),
            "CELERY_BROKER_URL": "filesystem://",  # this file is about the embedded broker
            "CELERY_FILESYSTEM_POLL_SECONDS": "0.01",  # consumers that race for every file
            "DEBUG": "true",
        }
    )
    return env


@pytest.fixture
def clients(tmp_path) -> Iterator[Clients]:
    c = Clients(tmp_path, embedded_env(tmp_path / "var"))
    yield c
    c.kill_all()


@pytest.mark.worker
def test_several_producers_and_consumers_deliver_every_message_exactly_once(clients, tmp_path):
    producers, consumers, each = 3, 3, 300
    stop = tmp_path / "stop"
    outs = [tmp_path / f"received{i}" for i in range(consumers)]
    readers = [clients.start("consume", str(out), str(stop)) for out in outs]
    writers = [clients.start("produce", f"p{i}", str(each)) for i in range(producers)]
    for w in writers:
        clients.wait_ok(w, 120)
    expected = {f"p{i}-{n}" for i in range(producers) for n in range(each)}
    wait_until(lambda: sum(ids_in(outs).values()) >= len(expected), 60)
    stop.touch()
    for r in readers:
        clients.wait_ok(r, 30)  # no consumer crashed on what it read

    received = ids_in(outs)
    assert sorted(i for i, n in received.items() if n > 1) == []  # none twice
    assert sorted(expected - set(received)) == []  # none lost
    assert set(received) == expected
    queue = tmp_path / "var" / "celery" / "queue"
    assert [f for f in os.listdir(queue) if f.endswith(".msg")] == []


@pytest.mark.worker
def test_a_message_whose_consumer_died_before_ack_is_delivered_again(clients, tmp_path):
    clients.wait_ok(clients.start("produce", "lonely", "1"), 60)
    held, again = tmp_path / "held", tmp_path / "again"
    holder = clients.start("hold", str(held))
    assert wait_until(lambda: held.exists() and held.read_text(), 30), clients.log_of(holder)
    assert list(ids_in([held])) == ["lonely-0"]
    os.kill(holder.pid, signal.SIGKILL)  # read, never acknowledged
    holder.wait(10)

    stop = tmp_path / "stop"
    reader = clients.start("consume", str(again), str(stop))
    wait_until(lambda: again.exists() and again.read_text(), 30)
    stop.touch()
    clients.wait_ok(reader, 30)
    assert ids_in([again]) == {"lonely-0": 1}


@pytest.mark.worker
def test_a_message_comes_back_when_its_consumer_dies_while_a_forked_child_lives(clients, tmp_path):
    """The lock of a consumer is shared with the processes it forks (Celery's pool); a
    child must not keep its dead parent's messages from coming back."""
    clients.wait_ok(clients.start("produce", "orphan", "1"), 60)
    held, again = tmp_path / "held", tmp_path / "again"
    holder = clients.start("hold-and-fork", str(held))
    child_pid = tmp_path / "held.child"
    assert wait_until(child_pid.exists, 30), clients.log_of(holder)
    child = int(child_pid.read_text())
    try:
        os.kill(holder.pid, signal.SIGKILL)  # the parent only
        holder.wait(10)
        stop = tmp_path / "stop"
        reader = clients.start("consume", str(again), str(stop))
        wait_until(lambda: ids_in([again]), 30)
        stop.touch()
        clients.wait_ok(reader, 30)
        os.kill(child, 0)  # the child was alive all along
    finally:
        os.kill(child, signal.SIGKILL)
    assert ids_in([again]) == {"orphan-0": 1}


# --- one process: the transport's bookkeeping ------------------------------------------------


@pytest.fixture
def broker(tmp_path, monkeypatch):
    """A connection factory on the embedded transport, in folders of this test."""
    from kombu import Connection
    from kombu.transport.virtual import BrokerState

    from bdre.broker import Transport

    # The declared exchanges and bindings of a filesystem transport are remembered by the
    # process (kombu's "global state"); this test's folders start with none.
    monkeypatch.setattr(Transport, "global_state", BrokerState())

    folders = {k: tmp_path / k for k in ("queue", "unacked", "bad", "processed", "control")}
    for folder in folders.values():
        folder.mkdir()
    options = {
        "data_folder_in": str(folders["queue"]),
        "data_folder_out": str(folders["queue"]),
        "unacked_folder": str(folders["unacked"]),
        "bad_folder": str(folders["bad"]),
        "processed_folder": str(folders["processed"]),
        "control_folder": str(folders["control"]),
        "dead_consumer_check_seconds": 0,
    }
    opened = []

    def connect():
        conn = Connection(
            "filesystem://", transport="bdre.broker:Transport", transport_options=options
        )
        opened.append(conn)
        return conn

    connect.folders = folders
    yield connect
    for conn in opened:
        conn.close()


def files_in(folder: Path) -> list[str]:
    return sorted(f for f in os.listdir(folder) if f.endswith(".msg"))


def test_a_message_read_by_a_live_consumer_is_not_delivered_to_another(broker):
    first, second = broker(), broker()
    first.SimpleQueue("q").put({"n": 1})
    held = first.SimpleQueue("q").get(timeout=2)
    assert held.payload == {"n": 1}
    with pytest.raises(Empty):
        second.SimpleQueue("q").get(timeout=0.5)  # its owner lives: not given back
    held.ack()
    assert files_in(broker.folders["queue"]) == []
    unacked = broker.folders["unacked"]
    assert [files_in(unacked / d) for d in os.listdir(unacked)] == [[], []]  # one per consumer


def test_a_rejected_message_comes_back_marked_redelivered(broker):
    conn = broker()
    queue = conn.SimpleQueue("q")
    queue.put({"n": 1})
    first = queue.get(timeout=2)
    assert not first.delivery_info.get("redelivered")
    first.requeue()
    again = queue.get(timeout=2)
    assert again.payload == {"n": 1} and again.delivery_info["redelivered"] is True
    again.ack()
    assert files_in(broker.folders["queue"]) == []


def test_a_consumer_closed_before_its_ack_gives_the_message_back(broker):
    conn = broker()
    conn.SimpleQueue("q").put({"n": 1})
    assert conn.SimpleQueue("q").get(timeout=2).payload == {"n": 1}  # never acknowledged
    conn.close()
    assert len(files_in(broker.folders["queue"])) == 1
    assert os.listdir(broker.folders["unacked"]) == []  # its folder and lock are gone
    message = broker().SimpleQueue("q").get(timeout=2)
    assert message.payload == {"n": 1}
    message.ack()


def test_a_file_that_is_no_message_is_set_aside_and_the_next_one_delivered(broker, caplog):
    conn = broker()
    queue = conn.SimpleQueue("q")
    (broker.folders["queue"] / "00000000000000000001_half.q.msg").write_bytes(b"")
    queue.put({"n": 2})
    message = queue.get(timeout=2)
    assert message.payload == {"n": 2}
    message.ack()
    assert files_in(broker.folders["bad"]) == ["00000000000000000001_half.q.msg"]
    assert "is not a message" in caplog.text
