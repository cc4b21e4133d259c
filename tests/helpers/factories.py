"""Factories for test data. Master rows are referenced by their seeded ids."""

from __future__ import annotations

from pathlib import Path

import factory
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.utils import timezone

from batches.models import (
    Batch,
    BatchConsumpQueue,
    BatchState,
    File,
    HiveTable,
    Partition,
    PartitionPreview,
)
from bdre.models import Membership, Role
from lineage.models import LineageNode, LineageQuery, LineageRelation, NodeKind, QueryKind
from processes.models import BusDomain, ExecState, InstanceExec, Process, Property, Server
from tests.helpers.jobs import JOB_TYPE, STEP_TYPE

TEST_PASSWORD = "pw-for-tests-1"


class UserFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = get_user_model()
        django_get_or_create = ("username",)

    username = factory.Sequence(lambda n: f"user{n}")
    email = factory.LazyAttribute(lambda u: f"{u.username}@example.com")
    password = factory.django.Password(TEST_PASSWORD)


class TeamFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Group
        django_get_or_create = ("name",)

    name = factory.Sequence(lambda n: f"team{n}")


class MembershipFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Membership

    user = factory.SubFactory(UserFactory)
    team = factory.SubFactory(TeamFactory)
    role = Role.VIEWER


class BusDomainFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = BusDomain

    name = factory.Sequence(lambda n: f"app{n}")
    team = factory.SubFactory(TeamFactory)
    owner = "owner"


class JobFactory(factory.django.DjangoModelFactory):
    """A bare job row, without the registry's checks or steps: for what the registry would
    refuse or never writes. A test that needs a registered job builds it with
    tests.helpers.jobs.build_job."""

    class Meta:
        model = Process

    name = factory.Sequence(lambda n: f"job_{n}")
    bus_domain = factory.SubFactory(BusDomainFactory)
    process_type_id = JOB_TYPE


class StepFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Process

    name = factory.Sequence(lambda n: f"step_{n}")
    parent = factory.SubFactory(JobFactory)
    bus_domain = factory.LazyAttribute(lambda s: s.parent.bus_domain)
    process_type_id = STEP_TYPE


class PropertyFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Property

    process = factory.SubFactory(StepFactory)
    config_group = "group"
    key = factory.Sequence(lambda n: f"key{n}")
    value = "value"


class InstanceExecFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = InstanceExec

    process = factory.SubFactory(JobFactory)
    start_ts = factory.LazyFunction(timezone.now)
    exec_state_id = ExecState.SUCCESS


class BatchFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Batch

    bus_domain = factory.SubFactory(BusDomainFactory)
    batch_type = "file"


class QueueRowFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = BatchConsumpQueue

    process = factory.SubFactory(StepFactory)
    source_batch = factory.SubFactory(
        BatchFactory, bus_domain=factory.SelfAttribute("..process.bus_domain")
    )
    insert_ts = factory.LazyFunction(timezone.now)
    batch_state_id = BatchState.NEW
    batch_marking = "2026-11-20"


class FileFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = File

    batch = factory.SubFactory(BatchFactory)
    team = factory.LazyAttribute(lambda f: f.batch.bus_domain.team if f.batch.bus_domain else None)
    path = factory.Sequence(lambda n: f"/landing/file{n}.tsv")
    file_size = 100
    file_hash = factory.Sequence(lambda n: f"hash{n}")
    creation_ts = factory.LazyFunction(timezone.now)


class HiveTableFactory(factory.django.DjangoModelFactory):
    """A table written by a step of ``bus_domain`` (so its team's), partitioned by batch."""

    class Meta:
        model = HiveTable

    dbname = "default"
    table_name = factory.Sequence(lambda n: f"table{n}")
    bus_domain = factory.SubFactory(BusDomainFactory)
    team = factory.LazyAttribute(lambda t: t.bus_domain.team)
    location = factory.LazyAttribute(lambda t: f"/warehouse/{t.dbname}/{t.table_name}")
    location_type = HiveTable.LocationType.EXTERNAL
    batch_id_partition_col = "batch_id"


class PartitionFactory(factory.django.DjangoModelFactory):
    """A table's partition of a batch, written by a step run and published."""

    class Meta:
        model = Partition

    table = factory.SubFactory(HiveTableFactory)
    batch = factory.SubFactory(BatchFactory)
    location = factory.LazyAttribute(lambda p: f"{p.table.location}/batch_id={p.batch.pk}/run-0")
    state = Partition.State.PUBLISHED
    written_at = factory.LazyFunction(timezone.now)


class PartitionPreviewFactory(factory.django.DjangoModelFactory):
    """A partition's first rows as a Spark worker read them (batches.preview.read)."""

    class Meta:
        model = PartitionPreview

    partition = factory.SubFactory(PartitionFactory)
    rows = 20
    state = PartitionPreview.State.DONE
    columns = factory.LazyFunction(lambda: [["event_id", "string"], ["batch_id", "int"]])
    values = factory.LazyFunction(list)
    asked_at = factory.LazyFunction(timezone.now)
    finished_at = factory.LazyAttribute(lambda p: p.asked_at)


class ServerFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Server

    team = factory.SubFactory(TeamFactory)
    server_type = "s3"
    name = factory.Sequence(lambda n: f"server{n}")


def grant_root(team, root: str | Path, **kwargs) -> Server:
    """What an installation superuser does to let ``team`` (a Group) read and write inside
    ``root`` (a folder, ``file:///...``, ``s3://bucket/prefix/`` or a jdbc: URL)."""
    root = str(root)
    if root.startswith("/"):
        root = Path(root).as_uri()
    return ServerFactory(
        team=team, server_type=kwargs.pop("server_type", "local"), root=root, **kwargs
    )


class LineageQueryFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = LineageQuery

    query_string = "SELECT a FROM t"
    query_type_id = QueryKind.SPARK_SQL
    process = factory.SubFactory(StepFactory)


class LineageNodeFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = LineageNode

    node_type_id = NodeKind.TABLE
    qualified_name = factory.Sequence(lambda n: f"default.table{n}")
    display_name = factory.LazyAttribute(lambda n: n.qualified_name)


class LineageRelationFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = LineageRelation

    src_node = factory.SubFactory(LineageNodeFactory)
    target_node = factory.SubFactory(LineageNodeFactory)
    query = factory.SubFactory(LineageQueryFactory)
