// Which Python runs the gradguard server. Pure: no `vscode` import, so the
// resolution order is unit-tested under plain Node (test/unit/interpreter.test.ts).
//
// Order (first that yields something wins):
//   1. the `gradguard.interpreter` setting (with ${workspaceFolder}, ${userHome}, ~ expanded;
//      a relative path is taken relative to the workspace folder);
//   2. the Python extension's active environment for the document's workspace folder,
//      when that extension is installed (it is optional: no extensionDependencies);
//   3. `python3`, then `python`, on PATH.
import * as path from "node:path";

export type InterpreterSource = "setting" | "python-extension" | "path";

export interface ResolvedInterpreter {
  /** Absolute path (or bare command name when only found by name) of the interpreter. */
  python: string;
  source: InterpreterSource;
}

export interface ResolveInputs {
  /** Raw value of `gradguard.interpreter` (may be empty / undefined). */
  setting: string | undefined;
  /** Folder the setting's variables and relative paths refer to. */
  workspaceFolder: string | undefined;
  home: string;
  /** Active environment's interpreter according to the Python extension, if installed. */
  pythonExtension: () => Promise<string | undefined>;
  /** Finds an executable on PATH; returns its absolute path or undefined. */
  which: (name: string) => string | undefined;
}

/** Expands `${workspaceFolder}`, `${userHome}`, `${env:NAME}` and a leading `~`. */
export function expandSetting(
  value: string,
  workspaceFolder: string | undefined,
  home: string,
  env: Record<string, string | undefined> = {},
): string {
  let v = value.trim();
  if (v === "~" || v.startsWith("~/")) {
    v = home + v.slice(1);
  }
  v = v.replace(/\$\{userHome\}/g, home);
  v = v.replace(/\$\{env:([^}]+)\}/g, (_m, name: string) => env[name] ?? "");
  if (workspaceFolder !== undefined) {
    v = v.replace(/\$\{workspaceFolder\}/g, workspaceFolder);
    // A relative path with a separator (".venv/bin/python") is relative to the folder;
    // a bare name ("python3.12") is a command looked up on PATH.
    if (!path.isAbsolute(v) && v.includes("/")) {
      v = path.join(workspaceFolder, v);
    }
  }
  return v;
}

export async function resolveInterpreter(inp: ResolveInputs): Promise<ResolvedInterpreter | undefined> {
  const raw = (inp.setting ?? "").trim();
  if (raw !== "") {
    const expanded = expandSetting(raw, inp.workspaceFolder, inp.home);
    const python = path.isAbsolute(expanded) ? expanded : (inp.which(expanded) ?? expanded);
    return { python, source: "setting" };
  }
  let fromExtension: string | undefined;
  try {
    fromExtension = await inp.pythonExtension();
  } catch {
    fromExtension = undefined; // a broken or still-loading Python extension is not fatal
  }
  if (fromExtension && fromExtension.trim() !== "") {
    return { python: fromExtension.trim(), source: "python-extension" };
  }
  for (const name of ["python3", "python"]) {
    const found = inp.which(name);
    if (found) {
      return { python: found, source: "path" };
    }
  }
  return undefined;
}

/** PATH lookup: `which` for the given PATH string and file test. */
export function whichIn(
  name: string,
  pathEnv: string | undefined,
  isExecutable: (file: string) => boolean,
  platform: NodeJS.Platform = process.platform,
): string | undefined {
  if (name.includes("/") || (platform === "win32" && name.includes("\\"))) {
    return isExecutable(name) ? name : undefined;
  }
  const sep = platform === "win32" ? ";" : ":";
  const exts = platform === "win32" ? [".exe", ".cmd", ".bat", ""] : [""];
  for (const dir of (pathEnv ?? "").split(sep)) {
    if (!dir) continue;
    for (const ext of exts) {
      const candidate = path.join(dir, name + ext);
      if (isExecutable(candidate)) return candidate;
    }
  }
  return undefined;
}
