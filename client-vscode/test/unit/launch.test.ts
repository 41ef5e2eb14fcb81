import { strict as assert } from "node:assert";
import { execFileSync, spawnSync } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { test } from "node:test";
import {
  PROBE_MARK,
  compareVersions,
  explainPipFailure,
  installCommand,
  parseProbe,
  pickWheel,
  probeArgs,
  serverCommand,
} from "../../src/launch";

const repoPython = path.resolve(__dirname, "..", "..", "..", ".venv", "bin", "python");

test("the server runs isolated: python -I -m gradguard serve", () => {
  assert.deepEqual(serverCommand("/v/bin/python"), { command: "/v/bin/python", args: ["-I", "-m", "gradguard", "serve"] });
});

test("probe output parsing", () => {
  const ok = parseProbe(`noise\n${PROBE_MARK}{"python":"/p","pythonVersion":"3.11.2","version":"0.1.0"}\n`, "", 0);
  assert.equal(ok.kind, "ok");
  const missing = parseProbe(`${PROBE_MARK}{"python":"/p","pythonVersion":"3.11.2","error":"ModuleNotFoundError: No module named 'gradguard'"}`, "", 0);
  assert.equal(missing.kind, "missing");
  const old = parseProbe(`${PROBE_MARK}{"python":"/p","pythonVersion":"3.8.10","version":"0.1.0"}`, "", 0);
  assert.equal(old.kind, "unusable");
  assert.match((old as { reason: string }).reason, /3\.8\.10/);
  const py2 = parseProbe("", "Unknown option: -I\nusage: python2 ...", 2);
  assert.equal(py2.kind, "unusable");
  assert.match((py2 as { reason: string }).reason, /Unknown option: -I/);
  assert.deepEqual(parseProbe("", "", null, "/nope was not found"), { kind: "unusable", reason: "/nope was not found" });
});

test("install command prefers the bundled wheel", () => {
  assert.deepEqual(installCommand("/p", "/ext/bundled/gradguard-0.1.0-py3-none-any.whl").args.slice(-1), ["/ext/bundled/gradguard-0.1.0-py3-none-any.whl"]);
  assert.deepEqual(installCommand("/p", undefined).args, ["-m", "pip", "install", "--disable-pip-version-check", "gradguard"]);
  assert.equal(pickWheel(["README", "gradguard-0.1.0-py3-none-any.whl", "gradguard-0.10.0-py3-none-any.whl", "other-9.0-py3-none-any.whl"]), "gradguard-0.10.0-py3-none-any.whl");
  assert.equal(pickWheel([]), undefined);
  assert.ok(compareVersions("0.10.0", "0.9.9") > 0);
  assert.match(explainPipFailure("error: externally-managed-environment\n..."), /virtual environment/);
  assert.match(explainPipFailure("/usr/bin/python3: No module named pip"), /no pip/);
});

// The real interpreter: the repo's venv, where gradguard is installed (editable).
test("probing the repo's venv finds gradguard, even from a folder that shadows it", { skip: !existsSync(repoPython) && "no .venv" }, () => {
  const ws = mkdtempSync(path.join(os.tmpdir(), "gg-shadow-"));
  try {
    // A workspace with its own `gradguard` package and a PYTHONPATH pointing at it.
    mkdirSync(path.join(ws, "gradguard"));
    writeFileSync(path.join(ws, "gradguard", "__init__.py"), "raise SystemExit('shadowed: the workspace copy was imported')\n");
    const env = { ...process.env, PYTHONPATH: ws };
    const run = spawnSync(repoPython, probeArgs(), { cwd: ws, env, encoding: "utf8", timeout: 60_000 });
    const outcome = parseProbe(run.stdout, run.stderr, run.status);
    assert.equal(outcome.kind, "ok", JSON.stringify(outcome) + run.stderr);
    if (outcome.kind === "ok") assert.match(outcome.probe.version ?? "", /^\d+\.\d+/);
    // Control: without -I the same folder does shadow the package (so the test above means something).
    const plain = spawnSync(repoPython, ["-c", "import gradguard"], { cwd: ws, env, encoding: "utf8" });
    assert.notEqual(plain.status, 0);
    assert.match(plain.stderr + plain.stdout, /shadowed/);
  } finally {
    rmSync(ws, { recursive: true, force: true });
  }
});

test("probing a Python without gradguard reports it missing", () => {
  let bare: string | undefined;
  const venv = mkdtempSync(path.join(os.tmpdir(), "gg-bare-"));
  try {
    // A fresh venv without site packages cannot see gradguard.
    const base = existsSync(repoPython) ? repoPython : "python3";
    execFileSync(base, ["-m", "venv", "--without-pip", venv], { stdio: "ignore" });
    bare = path.join(venv, "bin", "python");
    const run = spawnSync(bare, probeArgs(), { encoding: "utf8", timeout: 60_000 });
    const outcome = parseProbe(run.stdout, run.stderr, run.status);
    assert.equal(outcome.kind, "missing", JSON.stringify(outcome));
    if (outcome.kind === "missing") assert.match(outcome.probe.error ?? "", /gradguard/);
  } finally {
    rmSync(venv, { recursive: true, force: true });
  }
});

test("a missing interpreter is unusable, not a crash", () => {
  const run = spawnSync("/nonexistent/python", probeArgs(), { encoding: "utf8" });
  const err = run.error as NodeJS.ErrnoException | undefined;
  assert.equal(err?.code, "ENOENT");
  assert.equal(parseProbe("", "", null, "/nonexistent/python was not found").kind, "unusable");
});
