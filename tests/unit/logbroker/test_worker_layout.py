"""The workers of `serve --workers N`: identities, data dirs, ports, peers (worker_layout)."""

from __future__ import annotations

from pathlib import Path

import pytest

from api.node import _check_standalone, build_parser
from logbroker.node_settings import SettingsError, cluster_settings, resolve_settings
from logbroker.worker_layout import worker_specs


def test_worker_one_is_the_node_itself_and_the_others_join_it() -> None:
    specs = worker_specs(workers=3, node_name="rabbit@box", data_dir="/d", cluster_port=None,
                         peers="", join="", advertised_host="127.0.0.1")
    assert [(s.node_name, s.data_dir, s.cluster_port) for s in specs] == [
        ("rabbit@box", "/d", 25672), ("rabbit@box-w2", "/d/workers/w2", 25673),
        ("rabbit@box-w3", "/d/workers/w3", 25674)]
    assert (specs[0].peers, specs[0].join) == ("", "")
    assert specs[1].join == "rabbit@box@127.0.0.1:25672"
    assert specs[2].peers == "rabbit@box-w3@127.0.0.1:25674"  # its own address only


def test_other_hosts_are_seeds_and_the_hosts_own_address_is_advertised() -> None:
    specs = worker_specs(workers=2, node_name="a", data_dir="/d", cluster_port=30000,
                         peers="a@10.0.0.1:30000,b@10.0.0.2:30000", join="",
                         advertised_host="0.0.0.0")
    assert specs[0].peers == "a@10.0.0.1:30000,b@10.0.0.2:30000"
    assert specs[1].join == "a@10.0.0.1:30000,b@10.0.0.2:30000"
    assert specs[1].peers == "a-w2@10.0.0.1:30001"
    joining = worker_specs(workers=2, node_name="b", data_dir="/d", cluster_port=30010,
                           peers="", join="a@10.0.0.1:30000", advertised_host="::1")
    assert joining[0].join == "a@10.0.0.1:30000"
    assert joining[1].join == "b@[::1]:30010,a@10.0.0.1:30000"


def test_each_workers_flags_make_a_valid_single_process_cluster_member() -> None:
    specs = worker_specs(workers=2, node_name="n", data_dir="/d", cluster_port=30000,
                         peers="", join="", advertised_host="127.0.0.1")
    for spec in specs:
        arguments = build_parser().parse_args(
            ["serve", "--workers", "4", "--peers", "x@h:1", *spec.flags()])
        settings = resolve_settings(arguments, {"LOGBROKER_CLUSTER_SECRET": "s"})
        assert (settings.workers, settings.reuse_port) == (1, True)
        assert settings.clustered
        cluster = cluster_settings(settings)
        assert cluster.node_name == spec.node_name
        assert cluster.cluster_port == spec.cluster_port
        assert cluster.advertised_host == "127.0.0.1"
        assert cluster.join == (spec.index > 1)


def test_bad_counts_and_ports_are_refused() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        worker_specs(workers=0, node_name="n", data_dir="/d", cluster_port=None, peers="",
                     join="", advertised_host="h")
    with pytest.raises(ValueError, match="65535"):
        worker_specs(workers=3, node_name="n", data_dir="/d", cluster_port=65534, peers="",
                     join="", advertised_host="h")


def test_a_cluster_members_data_dir_is_not_opened_standalone(tmp_path: Path) -> None:
    _check_standalone(str(tmp_path))  # a fresh or standalone data dir is fine
    (tmp_path / "raft").mkdir()
    with pytest.raises(SettingsError, match="raft"):
        _check_standalone(str(tmp_path))
