// How the server process is started and how an interpreter is probed for gradguard.
// Pure: no `vscode` import (unit-tested in test/unit/launch.test.ts).
//
// Why `-I`: the server is started with the user's project as a workspace, and a
// project may well contain a folder or file named `gradguard` (or `pygls`, `typing`,
// ...). Plain `python -m gradguard` puts the current directory first on sys.path, and
// PYTHONPATH / the user site can shadow packages too. `-I` (isolated mode, Python ≥ 3.4;
// we require ≥ 3.9) drops the cwd/script dir from sys.path and ignores PYTHON* variables
// and the user site, while the interpreter's own site-packages — a venv's included, and
// the .pth files of editable installs — are still used. `-P` would only drop the cwd and
// needs 3.11; a cwd outside the workspace would still honour PYTHONPATH. So: `-I`, and the
// process is additionally started with a neutral cwd (the extension's folder).

export const PROBE_MARK = "GRADGUARD_PROBE:";

/** Python source run with `-I -c`: reports the interpreter and whether gradguard's server imports. */
export const PROBE_SCRIPT = [
  "import json, sys",
  "r = {'python': sys.executable, 'pythonVersion': '%d.%d.%d' % tuple(sys.version_info[:3])}",
  "try:",
  "    import gradguard",
  "    r['version'] = getattr(gradguard, '__version__', '?')",
  "    r['location'] = getattr(gradguard, '__file__', None)",
  // The server's dependencies are only located, not imported: importing them costs
  // seconds that the server itself pays again right after.
  "    import importlib.util",
  "    for m in ('gradguard.lsp', 'pygls', 'lsprotocol'):",
  "        if importlib.util.find_spec(m) is None:",
  "            raise ImportError('No module named %r (a dependency of the gradguard server)' % m)",
  "except Exception as e:",
  "    r['error'] = '%s: %s' % (type(e).__name__, e)",
  `sys.stdout.write('${PROBE_MARK}' + json.dumps(r) + '\\n')`,
].join("\n");

export interface ProbeResult {
  python: string;
  pythonVersion: string;
  /** gradguard's version when its server imports; undefined otherwise. */
  version?: string;
  location?: string;
  /** Why gradguard (or one of its dependencies) could not be imported. */
  error?: string;
}

export type ProbeOutcome =
  | { kind: "ok"; probe: ProbeResult }
  | { kind: "missing"; probe: ProbeResult } // interpreter runs; gradguard (or a dependency) does not import
  | { kind: "unusable"; reason: string }; // interpreter does not run / too old / not Python

export function probeArgs(): string[] {
  return ["-I", "-c", PROBE_SCRIPT];
}

const MIN_PYTHON: [number, number] = [3, 9];

/** Interprets a finished probe run. */
export function parseProbe(stdout: string, stderr: string, exitCode: number | null, spawnError?: string): ProbeOutcome {
  if (spawnError) return { kind: "unusable", reason: spawnError };
  const line = stdout.split(/\r?\n/).find((l) => l.startsWith(PROBE_MARK));
  if (!line) {
    const detail = (stderr || stdout).trim().split(/\r?\n/).slice(-3).join(" ");
    return {
      kind: "unusable",
      reason: `it did not run the probe (exit code ${exitCode ?? "none"})${detail ? ": " + detail : ""}`,
    };
  }
  let probe: ProbeResult;
  try {
    probe = JSON.parse(line.slice(PROBE_MARK.length)) as ProbeResult;
  } catch {
    return { kind: "unusable", reason: "its probe output was not understood" };
  }
  const [maj, min] = (probe.pythonVersion ?? "0.0").split(".").map((n) => parseInt(n, 10));
  if (maj < MIN_PYTHON[0] || (maj === MIN_PYTHON[0] && min < MIN_PYTHON[1])) {
    return { kind: "unusable", reason: `it is Python ${probe.pythonVersion}; gradguard needs Python ${MIN_PYTHON.join(".")} or newer` };
  }
  if (probe.error || !probe.version) return { kind: "missing", probe };
  return { kind: "ok", probe };
}

export interface ServerCommand {
  command: string;
  args: string[];
}

export function serverCommand(python: string, extraArgs: string[] = []): ServerCommand {
  return { command: python, args: ["-I", "-m", "gradguard", "serve", ...extraArgs] };
}

/**
 * The pip command that installs gradguard into `python`: the wheel shipped inside the
 * extension when there is one (its dependencies still come from the package index unless
 * already installed), else the package by name.
 */
export function installCommand(python: string, bundledWheel: string | undefined): ServerCommand {
  const target = bundledWheel ?? "gradguard";
  return { command: python, args: ["-m", "pip", "install", "--disable-pip-version-check", target] };
}

/** Picks the newest `gradguard-<version>-*.whl` from a directory listing. */
export function pickWheel(files: string[]): string | undefined {
  const wheels = files
    .map((f) => ({ f, m: /^gradguard-(\d+(?:\.\d+)*)(?:[^-]*)-.*\.whl$/.exec(f) }))
    .filter((x): x is { f: string; m: RegExpExecArray } => x.m !== null);
  wheels.sort((a, b) => compareVersions(b.m[1], a.m[1]));
  return wheels[0]?.f;
}

export function compareVersions(a: string, b: string): number {
  const pa = a.split(".").map((n) => parseInt(n, 10) || 0);
  const pb = b.split(".").map((n) => parseInt(n, 10) || 0);
  for (let i = 0; i < Math.max(pa.length, pb.length); i++) {
    const d = (pa[i] ?? 0) - (pb[i] ?? 0);
    if (d !== 0) return d;
  }
  return 0;
}

/** Why pip failed, in one line a person can act on. */
export function explainPipFailure(output: string): string {
  if (/externally-managed-environment/.test(output)) {
    return "this Python is managed by the operating system (PEP 668); create a virtual environment (python3 -m venv .venv) and select it";
  }
  if (/No module named pip/.test(output)) {
    return "this Python has no pip; install pip or pick an interpreter from a virtual environment";
  }
  if (/Could not find a version|No matching distribution|Failed to establish a new connection|Network is unreachable/i.test(output)) {
    return "pip could not download gradguard or its dependencies (offline?)";
  }
  const last = output.trim().split(/\r?\n/).filter((l) => l.trim() !== "").slice(-1)[0];
  return last ? last.trim() : "pip failed";
}
