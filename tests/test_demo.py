"""The demo runs end to end, verifies every crop and reports fewer bytes for exact ranges."""

from __future__ import annotations

import uuid

from tessera.demo import main, run_demo


def test_run_demo_in_memory() -> None:
    phases = run_demo(f"memory://demo-{uuid.uuid4().hex[:8]}", images=6, size=64)
    assert phases["write"].by_method["put"].requests == 6
    assert phases["write"].bytes_sent == 6 * 64 * 64 * 3
    assert phases["whole"].bytes_received == 6 * 64 * 64 * 3
    assert phases["ranges"].by_method["range"].requests == 6
    assert phases["ranges"].bytes_received < phases["whole"].bytes_received
    assert phases["ranges"].cost_usd("s3") < phases["whole"].cost_usd("s3")


def test_demo_cli_reruns_on_the_same_folder(tmp_path, capsys) -> None:
    url = (tmp_path / "store").as_uri()
    main(["--store", url, "--images", "3", "--size", "32"])
    main(["--store", url, "--images", "2", "--size", "32"])  # replaces the earlier run
    out = capsys.readouterr().out
    assert "exact ranges" in out and "fewer bytes" in out
    assert len(list((tmp_path / "store" / "images").iterdir())) == 2
