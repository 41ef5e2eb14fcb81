import { strict as assert } from "node:assert";
import { test } from "node:test";
import { expandSetting, resolveInterpreter, whichIn, type ResolveInputs } from "../../src/interpreter";

function inputs(over: Partial<ResolveInputs>): ResolveInputs {
  return {
    setting: undefined,
    workspaceFolder: "/ws",
    home: "/home/u",
    pythonExtension: async () => undefined,
    which: () => undefined,
    ...over,
  };
}

test("the gradguard.interpreter setting wins over the Python extension and PATH", async () => {
  let asked = false;
  const r = await resolveInterpreter(
    inputs({
      setting: "${workspaceFolder}/.venv/bin/python",
      pythonExtension: async () => {
        asked = true;
        return "/envs/conda/bin/python";
      },
      which: () => "/usr/bin/python3",
    }),
  );
  assert.deepEqual(r, { python: "/ws/.venv/bin/python", source: "setting" });
  assert.equal(asked, false, "the Python extension is not consulted when the setting is set");
});

test("the Python extension's active environment comes second", async () => {
  const r = await resolveInterpreter(
    inputs({ setting: "  ", pythonExtension: async () => "/envs/a/bin/python", which: () => "/usr/bin/python3" }),
  );
  assert.deepEqual(r, { python: "/envs/a/bin/python", source: "python-extension" });
});

test("PATH comes last: python3 before python", async () => {
  const seen: string[] = [];
  const r = await resolveInterpreter(
    inputs({
      which: (n) => {
        seen.push(n);
        return n === "python" ? "/usr/bin/python" : n === "python3" ? "/usr/bin/python3" : undefined;
      },
    }),
  );
  assert.deepEqual(r, { python: "/usr/bin/python3", source: "path" });
  assert.deepEqual(seen, ["python3"]);
  const r2 = await resolveInterpreter(inputs({ which: (n) => (n === "python" ? "/opt/bin/python" : undefined) }));
  assert.deepEqual(r2, { python: "/opt/bin/python", source: "path" });
});

test("a Python extension that throws or is absent falls through to PATH", async () => {
  const r = await resolveInterpreter(
    inputs({
      pythonExtension: async () => {
        throw new Error("not activated");
      },
      which: (n) => (n === "python3" ? "/usr/bin/python3" : undefined),
    }),
  );
  assert.equal(r?.source, "path");
});

test("nothing found gives undefined", async () => {
  assert.equal(await resolveInterpreter(inputs({})), undefined);
});

test("setting expansion: variables, ~, relative paths, bare command names", () => {
  assert.equal(expandSetting("~/venvs/x/bin/python", "/ws", "/home/u"), "/home/u/venvs/x/bin/python");
  assert.equal(expandSetting("${userHome}/p", "/ws", "/home/u"), "/home/u/p");
  assert.equal(expandSetting(".venv/bin/python", "/ws", "/home/u"), "/ws/.venv/bin/python");
  assert.equal(expandSetting("python3.12", "/ws", "/home/u"), "python3.12");
  assert.equal(expandSetting("${env:VENV}/bin/python", "/ws", "/h", { VENV: "/opt/v" }), "/opt/v/bin/python");
  assert.equal(expandSetting("/abs/工作区/python", "/ws", "/h"), "/abs/工作区/python");
});

test("a bare command name in the setting is looked up on PATH", async () => {
  const r = await resolveInterpreter(inputs({ setting: "python3.12", which: (n) => (n === "python3.12" ? "/usr/bin/python3.12" : undefined) }));
  assert.deepEqual(r, { python: "/usr/bin/python3.12", source: "setting" });
});

test("whichIn walks PATH in order and skips empty entries", () => {
  const exec = new Set(["/b/python3", "/c/python3"]);
  assert.equal(whichIn("python3", ":/a::/b:/c", (f) => exec.has(f), "linux"), "/b/python3");
  assert.equal(whichIn("python3", undefined, () => true, "linux"), undefined);
  assert.equal(whichIn("/b/python3", "/zzz", (f) => exec.has(f), "linux"), "/b/python3");
});
