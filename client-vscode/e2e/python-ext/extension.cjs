// A stand-in for the Python extension (ms-python.python) in gradguard's end-to-end test.
// It returns, from activate(), the shape of the Python extension's exported API that
// @vscode/python-extension hands to gradguard's client: `environments` with the active
// environment (read from the `gradguardE2e.activeInterpreter` setting), its resolution to an
// executable, and the event fired when it changes.
const vscode = require("vscode");

function activate(context) {
  const log = vscode.window.createOutputChannel("gradguard e2e: Python stand-in", { log: true });
  const changed = new vscode.EventEmitter();
  const setting = () => vscode.workspace.getConfiguration("gradguardE2e").get("activeInterpreter") || "";
  let active = setting();
  const envPath = (p) => ({ id: p, path: p });

  function setActive(next, why) {
    if (next === active) return;
    active = next;
    log.info(`active environment → ${active} (${why})`);
    changed.fire({ ...envPath(active), resource: undefined });
  }

  context.subscriptions.push(
    log,
    changed,
    vscode.workspace.onDidChangeConfiguration((e) => {
      if (e.affectsConfiguration("gradguardE2e.activeInterpreter")) setActive(setting(), "setting changed");
    }),
  );

  const environments = {
    getActiveEnvironmentPath(resource) {
      log.info(`getActiveEnvironmentPath(${resource ? resource.toString() : ""}) → ${active}`);
      return envPath(active);
    },
    async resolveEnvironment(env) {
      const p = typeof env === "string" ? env : env && env.path;
      if (!p) return undefined;
      return { id: p, path: p, executable: { uri: vscode.Uri.file(p), bitness: "64-bit", sysPrefix: "" }, environment: undefined, version: undefined, tools: [] };
    },
    async updateActiveEnvironmentPath(env) {
      setActive(typeof env === "string" ? env : env.path, "updateActiveEnvironmentPath");
    },
    onDidChangeActiveEnvironmentPath: changed.event,
    known: [],
    onDidChangeEnvironments: new vscode.EventEmitter().event,
    async refreshEnvironments() {},
  };
  log.info(`activated; active environment ${active || "(none)"}`);
  return { ready: Promise.resolve(), environments };
}

function deactivate() {}

module.exports = { activate, deactivate };
