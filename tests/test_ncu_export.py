"""The speed-of-light CSV that `--profile ncu` leaves beside each pair's .ncu-rep (common.launch.ncu_speed_of_light),
checked with a stand-in `ncu` on PATH: the real one runs only on the GPU machine."""
from common.launch import ncu_speed_of_light
from conftest import stand_ins

SOL = '"ID","Kernel Name","Section Name","Metric Name","Metric Unit","Metric Value"\n' \
      '"0","softmax_kernel","GPU Speed Of Light Throughput","Memory Throughput","%","91.2"\n'


def fake_ncu(tmp_path, body: str):
    return stand_ins(tmp_path, {"ncu": body})


def test_the_reports_speed_of_light_rows_are_written_beside_it(tmp_path, monkeypatch):
    args = tmp_path / "args.txt"
    monkeypatch.setenv("PATH", fake_ncu(tmp_path, f'echo "$@" > {args}\ncat <<"END"\n{SOL}END\n'))
    rep = tmp_path / "ch13_softmax.ncu-rep"
    rep.write_bytes(b"report")
    out = ncu_speed_of_light(rep)
    assert out == tmp_path / "ch13_softmax.sol.csv" and out.read_text() == SOL
    called = args.read_text().split()
    assert called[:2] == ["--import", str(rep)] and "SpeedOfLight" in called and "--csv" in called


def test_no_csv_without_a_report_or_when_ncu_fails(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", fake_ncu(tmp_path, 'echo "==ERROR== cannot open" >&2\nexit 1\n'))
    rep = tmp_path / "ch13_softmax.ncu-rep"
    assert ncu_speed_of_light(rep) is None                      # no report: nothing to read
    rep.write_bytes(b"report")
    assert ncu_speed_of_light(rep) is None                      # ncu refuses it: no file, no partial CSV
    assert not (tmp_path / "ch13_softmax.sol.csv").exists()
