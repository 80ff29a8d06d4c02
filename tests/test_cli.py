"""`studio validate PATH…` and `studio schema PROCESS.yaml`, as a subprocess and in-process via main()."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator

from studio.cli import main

ROOT = Path(__file__).resolve().parent.parent
SUPPLIER = ROOT / "processes" / "supplier-onboarding.yaml"
REFUND = ROOT / "processes" / "refund.yaml"
LOCATED = re.compile(r"^\S+:\d+:\d+: ", re.M)  # file:line:col: at the start of a line
TAIL = "steps:\n  - {id: done, kind: finish}\n"
# How long a command may take before the test calls it a hang: an alias bomb expanded or a 5 MB file read
# whole would never finish; a slow machine is not a failure. How fast validate is: benchmarks/validate.py.
HANG = 300.0


def studio(*args: str | Path, cwd: Path = ROOT, timeout: float = HANG) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "studio.cli", *map(str, args)], cwd=cwd, capture_output=True,
                          text=True, timeout=timeout)


def no_traceback(proc: subprocess.CompletedProcess[str]) -> None:
    assert "Traceback" not in proc.stdout and "Traceback" not in proc.stderr, proc.stderr


# -- validate ---------------------------------------------------------------------------------------

def test_validate_bundled_files() -> None:
    proc = studio("validate", "processes/supplier-onboarding.yaml", "processes/refund.yaml")
    assert (proc.returncode, proc.stderr) == (0, "")
    assert proc.stdout.splitlines() == ["processes/supplier-onboarding.yaml: ok (supplier-onboarding, 4 steps)",
                                        "processes/refund.yaml: ok (refund, 7 steps)"]


def test_validate_a_folder(tmp_path: Path) -> None:
    (tmp_path / "b.yml").write_text(SUPPLIER.read_text())
    (tmp_path / "a.yaml").write_text(REFUND.read_text())
    (tmp_path / "directory.yaml").write_text("people: []\n")  # the identity directory is not a process
    (tmp_path / "notes.txt").write_text("not yaml")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "c.yaml").write_text("broken: [")  # subfolders are not searched
    proc = studio("validate", ".", cwd=tmp_path)
    assert proc.returncode == 0
    assert proc.stdout.splitlines() == ["a.yaml: ok (refund, 7 steps)", "b.yml: ok (supplier-onboarding, 4 steps)"]


def test_validate_reports_errors_and_exits_1(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nsteps:\n  - {id: a, kind: agent, instructions: Go., next: aprove}\n"
                   "  - {id: approve, kind: finish}\n")
    proc = studio("validate", "bad.yaml", SUPPLIER, cwd=tmp_path)
    assert proc.returncode == 1
    assert proc.stdout.splitlines() == [
        "bad.yaml:3:51: steps[0].next: unknown step 'aprove' (did you mean 'approve'?)",
        f"{SUPPLIER}: ok (supplier-onboarding, 4 steps)",
    ]
    no_traceback(proc)


def test_validate_prints_warnings_and_exits_0(tmp_path: Path) -> None:
    (tmp_path / "w.yaml").write_text("name: w\nsteps:\n  - {id: a, kind: finish}\n  - {id: b, kind: finish}\n")
    proc = studio("validate", "w.yaml", cwd=tmp_path)
    assert proc.returncode == 0
    assert proc.stdout.splitlines() == [
        "w.yaml:4:5: warning: steps[1]: step 'b' is unreachable from the first step 'a'",
        "w.yaml: ok (w, 2 steps, 1 warning)",
    ]


def test_validate_needs_a_path() -> None:
    proc = studio("validate")
    assert proc.returncode == 2 and "the following arguments are required: paths" in proc.stderr
    no_traceback(proc)


# -- bad input: exit 1, a located message on stdout, never a traceback ------------------------------

def _bomb() -> str:
    text = "name: x\nlol: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n"
    prev = "a"
    for name in "bcdefghi":
        text += f"{name}: &{name} [" + ", ".join(["*" + prev] * 10) + "]\n"
        prev = name
    return text + TAIL


BAD_FILES: dict[str, tuple[bytes, str]] = {
    # name: (content, the exact line printed)
    "malformed": (b"name: x\nsteps:\n  - {id: a, kind: finish\n",
                  "p.yaml:4:1: not valid YAML: did not find expected ',' or '}'"),
    "list": (b"- name: x\n- steps: []\n", "p.yaml:1:1: expected a mapping with name, steps, … at the top; got a list"),
    "scalar": (b"just words\n", "p.yaml:1:1: expected a mapping with name, steps, … at the top; got a single value"),
    "empty": (b"", "p.yaml:1:1: the file is empty; expected a mapping with name, steps, …"),
    "duplicate-step-ids": (b"name: x\nsteps:\n  - {id: a, kind: finish}\n  - {id: a, kind: finish}\n",
                           "p.yaml:4:10: steps[1].id: duplicate step id 'a'"),
    "duplicate-keys": (b"name: x\nsteps:\n  - id: a\n    kind: finish\n    id: b\n", "p.yaml:5:5: duplicate key 'id'"),
    "unknown-kind": (b"name: x\nsteps:\n  - {id: a, kind: aprove}\n",
                     "p.yaml:3:19: steps[0].kind: unknown kind 'aprove' (did you mean 'approve'?); expected one of "
                     "agent, task, approve, wait_for, finish"),
    "unknown-field": (b"name: x\nstep:\n  - {id: a, kind: finish}\n",
                      "p.yaml:2:1: step: unknown field 'step' (did you mean 'steps'?); expected one of name, "
                      "description, requires, inputs, body, steps"),
    "next-to-missing-step": (b"name: x\nsteps:\n  - {id: a, kind: agent, instructions: Go., next: b}\n",
                             "p.yaml:3:51: steps[0].next: unknown step 'b'"),
    "unknown-type": (b"name: x\ninputs: {amount: money}\n" + TAIL.encode(),
                     "p.yaml:2:18: inputs.amount: unknown type 'money'; expected one of string, number, integer, "
                     "boolean, object, email, date, datetime, any, with [] for a list and ? for optional"),
    "alias-bomb": (_bomb().encode(), "p.yaml:7:4: the document expands to more than 200000 values (alias bomb?)"),
    "deep-nesting": (b"name: x\nsteps: " + b"[" * 100_000 + b"]" * 100_000 + b"\n",
                     "p.yaml:2:71: nested deeper than 64 levels"),
    "binary": (bytes(range(256)) * 4, "p.yaml:2:118: not UTF-8 text (byte 0x80); save the file as UTF-8"),
    "nul-bytes": (b"name: x\x00\n", "p.yaml:1:8: not valid YAML: control character U+0000 is not allowed (a binary "
                                    "file?)"),
    "latin-1": ("name: café\n".encode("latin-1"), "p.yaml:1:10: not UTF-8 text (byte 0xe9); save the file as UTF-8"),
    "python-tag": (b"name: !!python/object/apply:os.system ['echo pwned']\n" + TAIL.encode(),
                   "p.yaml:1:7: unsupported tag '!!python/object/apply:os.system'; a process file uses plain lists"),
}


@pytest.mark.parametrize("case", list(BAD_FILES))
def test_bad_input_gets_a_located_error(tmp_path: Path, case: str) -> None:
    content, expected = BAD_FILES[case]
    (tmp_path / "p.yaml").write_bytes(content)
    proc = studio("validate", "p.yaml", cwd=tmp_path)  # subprocess.TimeoutExpired after HANG: a hang
    assert proc.returncode == 1
    assert LOCATED.match(proc.stdout)
    assert proc.stdout.splitlines() == [expected]
    assert "pwned" not in proc.stdout + proc.stderr
    no_traceback(proc)


def test_five_megabyte_file(tmp_path: Path) -> None:
    (tmp_path / "big.yaml").write_text("name: big\nbody: |\n" + ("  " + "x" * 97 + "\n") * 53_000 + TAIL)
    proc = studio("validate", "big.yaml", cwd=tmp_path)
    assert (proc.returncode, proc.stdout) == (1, "big.yaml:1:1: file too large (5.3 MB); a process file may be at "
                                                 "most 1 MB\n")
    no_traceback(proc)


def test_folder_without_process_files(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "directory.yaml").write_text("people: []\n")
    proc = studio("validate", "empty", cwd=tmp_path)
    assert (proc.returncode, proc.stdout) == (1, "empty:1:1: no process files (*.yaml, *.yml) in this folder\n")
    no_traceback(proc)


def test_missing_file(tmp_path: Path) -> None:
    proc = studio("validate", "nope.yaml", cwd=tmp_path)
    assert (proc.returncode, proc.stdout) == (1, "nope.yaml:1:1: cannot read: No such file or directory\n")
    no_traceback(proc)


def test_every_bad_file_at_once(tmp_path: Path) -> None:
    # One run over a folder of every bad file: each reported, the run still exits 1 without a traceback.
    for case, (content, _) in BAD_FILES.items():
        (tmp_path / f"{case}.yaml").write_bytes(content)
    (tmp_path / "good.yaml").write_text(SUPPLIER.read_text())
    proc = studio("validate", ".", cwd=tmp_path)
    assert proc.returncode == 1
    lines = proc.stdout.splitlines()
    assert len(lines) == len(BAD_FILES) + 1
    for case, (_, expected) in BAD_FILES.items():
        assert expected.replace("p.yaml", f"{case}.yaml") in lines
    assert "good.yaml: ok (supplier-onboarding, 4 steps)" in lines
    no_traceback(proc)


# -- schema -----------------------------------------------------------------------------------------

def test_schema_prints_the_generated_json_schemas() -> None:
    proc = studio("schema", "processes/supplier-onboarding.yaml")
    assert (proc.returncode, proc.stderr) == (0, "")
    schemas = json.loads(proc.stdout)
    assert set(schemas) == {"inputs", "outputs"} and set(schemas["outputs"]) == {"check_vendor"}
    for schema in [schemas["inputs"], *schemas["outputs"].values()]:
        Draft202012Validator.check_schema(schema)
        assert schema["additionalProperties"] is False
    assert schemas["inputs"]["$id"] == "https://agentprocess.io/schemas/processes/supplier-onboarding/inputs.json"
    assert schemas["outputs"]["check_vendor"]["required"] == ["cleared", "summary"]


def test_schema_of_an_invalid_file(tmp_path: Path) -> None:
    (tmp_path / "bad.yaml").write_text("name: x\nsteps:\n  - {id: a, kind: finish, outcome: [1]}\n")
    proc = studio("schema", "bad.yaml", cwd=tmp_path)
    assert (proc.returncode, proc.stdout) == (1, "")
    assert proc.stderr == "bad.yaml:3:36: steps[0].outcome: expected text\n"
    no_traceback(proc)


def test_schema_into_a_closed_pipe_exits_quietly() -> None:
    # `studio schema … | head`: the reader is gone before the writer writes.
    proc = subprocess.Popen([sys.executable, "-m", "studio.cli", "schema", str(REFUND)], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()
    stderr = proc.stderr.read().decode()
    assert proc.wait(timeout=HANG) == 0
    assert stderr == ""


def test_schema_piped_into_head() -> None:
    proc = subprocess.run(f"'{sys.executable}' -m studio.cli schema processes/refund.yaml | head -n 1", shell=True,
                          cwd=ROOT, capture_output=True, text=True, timeout=HANG)
    assert (proc.stdout, proc.stderr) == ("{\n", "")


# -- in-process -------------------------------------------------------------------------------------

def test_main_validate_in_process(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["validate", str(SUPPLIER)]) == 0
    assert capsys.readouterr().out == f"{SUPPLIER}: ok (supplier-onboarding, 4 steps)\n"
    bad = tmp_path / "bad.yaml"
    bad.write_text("- a\n")
    assert main(["validate", str(bad), str(REFUND)]) == 1
    assert capsys.readouterr().out.splitlines() == [
        f"{bad}:1:1: expected a mapping with name, steps, … at the top; got a list",
        f"{REFUND}: ok (refund, 7 steps)",
    ]
    (tmp_path / "none").mkdir()
    assert main(["validate", str(tmp_path / "none")]) == 1
    assert capsys.readouterr().out == f"{tmp_path / 'none'}:1:1: no process files (*.yaml, *.yml) in this folder\n"


def test_main_schema_in_process(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert main(["schema", str(REFUND)]) == 0
    schemas = json.loads(capsys.readouterr().out)
    assert set(schemas["outputs"]) == {"prepare", "execute", "reconcile"}
    assert schemas["outputs"]["prepare"]["properties"]["currency"] == {"description": "ISO 4217 code",
                                                                       "type": "string", "pattern": "^[A-Z]{3}$"}
    bad = tmp_path / "bad.yaml"
    bad.write_text("")
    assert main(["schema", str(bad)]) == 1
    captured = capsys.readouterr()
    assert (captured.out, captured.err) == ("", f"{bad}:1:1: the file is empty; expected a mapping with name, "
                                                "steps, …\n")


def test_main_survives_a_broken_pipe(monkeypatch: pytest.MonkeyPatch) -> None:
    class Closed:
        def write(self, text: str) -> int:
            raise BrokenPipeError(32, "Broken pipe")

        def flush(self) -> None:
            raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setattr(sys, "stdout", Closed())
    assert main(["schema", str(REFUND)]) == 0


def test_in_process_bomb_is_refused(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """The alias bomb is refused before it expands (10^9 values if it did: that would never end)."""
    path = tmp_path / "bomb.yaml"
    path.write_text(_bomb())
    codes: list[int] = []
    worker = threading.Thread(target=lambda: codes.append(main(["validate", str(path)])), daemon=True)
    worker.start()
    worker.join(HANG)
    assert not worker.is_alive(), f"validate still expanding the bomb after {HANG} s: a hang"
    assert codes == [1]
    assert capsys.readouterr().out == f"{path}:7:4: the document expands to more than 200000 values (alias bomb?)\n"


def test_a_loader_bug_is_reported_per_file(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
                                           tmp_path: Path) -> None:
    import studio.definition

    real = studio.definition.load_file

    def flaky(path: str | Path) -> object:
        if Path(path).name == "boom.yaml":
            raise RuntimeError("simulated bug")
        return real(path)

    monkeypatch.setattr(studio.definition, "load_file", flaky)
    (tmp_path / "boom.yaml").write_text("name: x\n")
    (tmp_path / "good.yaml").write_text(SUPPLIER.read_text())
    assert main(["validate", str(tmp_path)]) == 1
    assert capsys.readouterr().out.splitlines() == [
        f"{tmp_path / 'boom.yaml'}:1:1: internal error while checking this file (RuntimeError: simulated bug); "
        "please report it",
        f"{tmp_path / 'good.yaml'}: ok (supplier-onboarding, 4 steps)",
    ]


def test_unreadable_folder(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
                           tmp_path: Path) -> None:
    def denied(self: Path) -> object:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(Path, "iterdir", denied)  # running as root, chmod would not stop us
    assert main(["validate", str(tmp_path)]) == 1
    assert capsys.readouterr().out == f"{tmp_path}:1:1: cannot read this folder: Permission denied\n"
