// VS Code glue: finds a Python, checks gradguard is importable there, starts
// `python -I -m gradguard serve` over stdio with vscode-languageclient, forwards the
// settings, and offers Restart / Show Output / Fix All plus a status-bar item.
// Every decision that can be made without VS Code lives in interpreter.ts,
// settings.ts and launch.ts (unit-tested under plain Node).
import * as cp from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import * as vscode from "vscode";
import {
  DidChangeConfigurationNotification,
  LanguageClient,
  type LanguageClientOptions,
  type ServerOptions,
  State,
  TransportKind,
} from "vscode-languageclient/node";
import { resolveInterpreter, whichIn, type ResolvedInterpreter } from "./interpreter";
import {
  explainPipFailure,
  installCommand,
  parseProbe,
  pickWheel,
  probeArgs,
  serverCommand,
  type ProbeOutcome,
} from "./launch";
import { describeFixAll, runFixAll, type FixAllAction } from "./fixall";
import { shouldNotify, toServerSettings, type ServerSettings } from "./settings";

const SECTION = "gradguard";
const PYTHON_EXTENSION_ID = "ms-python.python";
export const FIX_ALL_KIND = vscode.CodeActionKind.SourceFixAll.append("gradguard");

type ServerState = "starting" | "ready" | "error" | "stopped" | "disabled";

interface PythonEnvironmentsApi {
  getActiveEnvironmentPath(resource?: vscode.Uri): { id: string; path: string };
  resolveEnvironment(env: { id: string; path: string }): Promise<{ executable: { uri?: vscode.Uri } } | undefined>;
  onDidChangeActiveEnvironmentPath: vscode.Event<unknown>;
}

class GradguardClient implements vscode.Disposable {
  private client: LanguageClient | undefined;
  private interpreter: ResolvedInterpreter | undefined;
  private readonly status: vscode.StatusBarItem;
  private queue: Promise<void> = Promise.resolve();
  private pythonApi: PythonEnvironmentsApi | undefined;
  private pythonApiHooked = false;
  private readonly disposables: vscode.Disposable[] = [];

  constructor(
    private readonly context: vscode.ExtensionContext,
    private readonly output: vscode.LogOutputChannel,
  ) {
    this.status = vscode.window.createStatusBarItem("gradguard.status", vscode.StatusBarAlignment.Right, 100);
    this.status.name = "gradguard";
    this.status.command = "gradguard.showOutput";
    this.setState("stopped");
    this.disposables.push(this.status);
  }

  // ------------------------------------------------------------------ state
  private setState(state: ServerState, detail?: string): void {
    const icon = { starting: "$(sync~spin)", ready: "$(check)", error: "$(error)", stopped: "$(circle-slash)", disabled: "$(circle-slash)" }[state];
    this.status.text = `${icon} gradguard`;
    const where = this.interpreter ? `\n${this.interpreter.python} (${this.interpreter.source})` : "";
    this.status.tooltip = `gradguard: ${state}${detail ? ` — ${detail}` : ""}${where}\nClick to show the output.`;
    this.status.backgroundColor = state === "error" ? new vscode.ThemeColor("statusBarItem.errorBackground") : undefined;
    this.status.show();
  }

  private notify(kind: "error" | "info", message: string, ...buttons: string[]): Thenable<string | undefined> {
    if (!shouldNotify(vscode.workspace.getConfiguration(SECTION).get("showNotifications"), kind)) {
      return Promise.resolve(undefined);
    }
    return kind === "error" ? vscode.window.showErrorMessage(message, ...buttons) : vscode.window.showInformationMessage(message, ...buttons);
  }

  /** Serialises start/stop so a burst of setting changes cannot start two servers. */
  private enqueue(job: () => Promise<void>): Promise<void> {
    this.queue = this.queue.then(job, job).catch((e: unknown) => {
      this.output.error(`gradguard: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}`);
      this.setState("error", String(e));
    });
    return this.queue;
  }

  restart(): Promise<void> {
    return this.enqueue(async () => {
      await this.stopClient();
      await this.startClient();
    });
  }

  stop(): Promise<void> {
    return this.enqueue(() => this.stopClient());
  }

  // ------------------------------------------------------------------ folder / settings
  private scopeFolder(): vscode.WorkspaceFolder | undefined {
    const doc = vscode.window.activeTextEditor?.document;
    return (doc && vscode.workspace.getWorkspaceFolder(doc.uri)) ?? vscode.workspace.workspaceFolders?.[0];
  }

  settingsFor(scope?: vscode.Uri | vscode.WorkspaceFolder): ServerSettings {
    const config = vscode.workspace.getConfiguration(SECTION, scope);
    const { settings, problems } = toServerSettings((key) => config.get(key));
    for (const p of problems) this.output.warn(p);
    return settings;
  }

  // ------------------------------------------------------------------ interpreter
  private async pythonExtensionApi(): Promise<PythonEnvironmentsApi | undefined> {
    if (this.pythonApi) return this.pythonApi;
    if (!vscode.extensions.getExtension(PYTHON_EXTENSION_ID)) return undefined;
    try {
      // Loaded lazily: the Python extension is optional (no extensionDependencies).
      const { PythonExtension } = await import("@vscode/python-extension");
      const api = await PythonExtension.api();
      this.pythonApi = api.environments as unknown as PythonEnvironmentsApi;
    } catch (e) {
      this.output.warn(`gradguard: the Python extension is installed but its API is not available: ${String(e)}`);
      return undefined;
    }
    if (!this.pythonApiHooked) {
      this.pythonApiHooked = true;
      this.disposables.push(
        this.pythonApi.onDidChangeActiveEnvironmentPath(() => {
          void this.onEnvironmentMaybeChanged("the Python extension's active environment changed");
        }),
      );
    }
    return this.pythonApi;
  }

  private async resolve(folder: vscode.WorkspaceFolder | undefined): Promise<ResolvedInterpreter | undefined> {
    const config = vscode.workspace.getConfiguration(SECTION, folder);
    return resolveInterpreter({
      setting: config.get<string>("interpreter"),
      workspaceFolder: folder?.uri.fsPath,
      home: os.homedir(),
      which: (name) => whichIn(name, process.env.PATH, isExecutable),
      pythonExtension: async () => {
        const api = await this.pythonExtensionApi();
        if (!api) return undefined;
        const active = api.getActiveEnvironmentPath(folder?.uri);
        const env = await api.resolveEnvironment(active);
        return env?.executable.uri?.fsPath;
      },
    });
  }

  async onEnvironmentMaybeChanged(why: string): Promise<void> {
    const next = await this.resolve(this.scopeFolder());
    if (next?.python !== this.interpreter?.python) {
      this.output.info(`gradguard: ${why}; restarting with ${next?.python ?? "no interpreter"}`);
      await this.restart();
    }
  }

  private probe(python: string): Promise<ProbeOutcome> {
    return new Promise((resolve) => {
      cp.execFile(
        python,
        probeArgs(),
        { cwd: this.context.extensionPath, timeout: 30_000, env: process.env, windowsHide: true },
        (err, stdout, stderr) => {
          const spawnError = err && (err as NodeJS.ErrnoException).code === "ENOENT" ? `${python} was not found` : undefined;
          const code = err ? (typeof err.code === "number" ? err.code : 1) : 0;
          resolve(parseProbe(String(stdout), String(stderr), code, spawnError));
        },
      );
    });
  }

  private bundledWheel(): string | undefined {
    const dir = path.join(this.context.extensionPath, "bundled");
    try {
      const wheel = pickWheel(fs.readdirSync(dir));
      return wheel ? path.join(dir, wheel) : undefined;
    } catch {
      return undefined;
    }
  }

  // ------------------------------------------------------------------ start / stop
  private async stopClient(): Promise<void> {
    const client = this.client;
    this.client = undefined;
    if (client) {
      try {
        await client.stop(3000);
      } catch (e) {
        this.output.warn(`gradguard: stopping the server: ${String(e)}`);
      }
      await client.dispose();
    }
    this.setState("stopped");
  }

  private async startClient(): Promise<void> {
    const folder = this.scopeFolder();
    if (!vscode.workspace.getConfiguration(SECTION, folder).get<boolean>("enable", true)) {
      this.output.info("gradguard: disabled by the gradguard.enable setting");
      this.setState("disabled", "gradguard.enable is false");
      return;
    }
    this.setState("starting");
    const interpreter = await this.resolve(folder);
    this.interpreter = interpreter;
    if (!interpreter) {
      const msg = "gradguard: no Python interpreter found. Set gradguard.interpreter, install the Python extension, or put python3 on PATH.";
      this.output.error(msg);
      this.setState("error", "no Python interpreter");
      void this.notify("error", msg, "Open Settings").then((pick) => {
        if (pick === "Open Settings") void vscode.commands.executeCommand("workbench.action.openSettings", "gradguard.interpreter");
      });
      return;
    }
    this.output.info(`gradguard: using ${interpreter.python} (from ${describeSource(interpreter.source)})`);
    const outcome = await this.probe(interpreter.python);
    if (outcome.kind === "unusable") {
      const msg = `gradguard: cannot use ${interpreter.python}: ${outcome.reason}.`;
      this.output.error(msg);
      this.setState("error", outcome.reason);
      void this.notify("error", msg, "Open Settings", "Show Output").then((pick) => {
        if (pick === "Open Settings") void vscode.commands.executeCommand("workbench.action.openSettings", "gradguard.interpreter");
        if (pick === "Show Output") this.output.show(true);
      });
      return;
    }
    if (outcome.kind === "missing") {
      const msg = `gradguard is not installed in ${interpreter.python} (Python ${outcome.probe.pythonVersion}).`;
      this.output.error(`${msg} Import failed with: ${outcome.probe.error ?? "unknown error"}`);
      this.setState("error", "gradguard is not installed in this Python");
      void this.offerInstall(interpreter.python, msg);
      return;
    }
    this.output.info(
      `gradguard ${outcome.probe.version} found in Python ${outcome.probe.pythonVersion} (${outcome.probe.location ?? "?"})`,
    );
    await this.launch(interpreter.python);
  }

  private async offerInstall(python: string, msg: string): Promise<void> {
    const install = "Install gradguard";
    const pick = await this.notify("error", msg, install, "Select Interpreter", "Show Output");
    if (pick === install) await this.install(python);
    else if (pick === "Select Interpreter") void this.selectInterpreter();
    else if (pick === "Show Output") this.output.show(true);
  }

  /** The Python extension's picker when it is installed (its change restarts us), else our setting. */
  private async selectInterpreter(): Promise<void> {
    if (vscode.extensions.getExtension(PYTHON_EXTENSION_ID) && !vscode.workspace.getConfiguration(SECTION).get<string>("interpreter")) {
      await vscode.commands.executeCommand("python.setInterpreter");
    } else {
      await vscode.commands.executeCommand("workbench.action.openSettings", "gradguard.interpreter");
    }
  }

  async install(python: string): Promise<void> {
    const { command, args } = installCommand(python, this.bundledWheel());
    this.setState("starting", "installing gradguard");
    this.output.info(`gradguard: running ${command} ${args.join(" ")}`);
    const result = await vscode.window.withProgress(
      { location: vscode.ProgressLocation.Notification, title: `Installing gradguard into ${python}…` },
      () =>
        new Promise<{ code: number | null; text: string }>((resolve) => {
          let text = "";
          const child = cp.spawn(command, args, { cwd: this.context.extensionPath, env: process.env, windowsHide: true });
          const take = (chunk: Buffer): void => {
            const s = chunk.toString();
            text += s;
            for (const line of s.split(/\r?\n/)) if (line.trim()) this.output.info(`pip: ${line}`);
          };
          child.stdout.on("data", take);
          child.stderr.on("data", take);
          child.on("error", (e) => resolve({ code: null, text: text + String(e) }));
          child.on("close", (code) => resolve({ code, text }));
        }),
    );
    if (result.code === 0) {
      this.output.info("gradguard: installed; starting the server");
      void this.notify("info", `gradguard installed into ${python}.`);
      await this.restart();
    } else {
      const why = explainPipFailure(result.text);
      this.output.error(`gradguard: installing failed: ${why}`);
      this.setState("error", "installing gradguard failed");
      const pick = await this.notify("error", `Installing gradguard failed: ${why}`, "Show Output");
      if (pick === "Show Output") this.output.show(true);
    }
  }

  private async launch(python: string): Promise<void> {
    const run = serverCommand(python);
    const serverOptions: ServerOptions = {
      command: run.command,
      args: run.args,
      transport: TransportKind.stdio,
      // A neutral cwd: with -I the cwd is not on sys.path anyway, but relative paths in a
      // user's PYTHONSTARTUP-like setups can't reach into the workspace either.
      options: { cwd: this.context.extensionPath, env: process.env },
    };
    const clientOptions: LanguageClientOptions = {
      documentSelector: [
        { scheme: "file", language: "python" },
        { scheme: "untitled", language: "python" },
        { scheme: "vscode-notebook-cell", language: "python" },
      ],
      outputChannel: this.output,
      diagnosticCollectionName: "gradguard",
      initializationOptions: this.settingsFor(this.scopeFolder()),
      middleware: {
        workspace: {
          // workspace/configuration for section "gradguard" answers with the same
          // normalised table as initializationOptions, scoped to the asked-for resource.
          configuration: async (params, token, next) => {
            const answers = await next(params, token);
            if (!Array.isArray(answers)) return answers;
            return params.items.map((item, i) => {
              if (item.section !== SECTION) return answers[i];
              const scope = item.scopeUri ? vscode.Uri.parse(item.scopeUri) : undefined;
              return this.settingsFor(scope);
            });
          },
        },
      },
    };
    const client = new LanguageClient("gradguard", "gradguard", serverOptions, clientOptions);
    this.client = client;
    client.onDidChangeState((e) => {
      if (this.client !== client) return;
      if (e.newState === State.Running) this.setState("ready", this.serverVersion(client));
      else if (e.newState === State.Starting) this.setState("starting");
      else if (e.newState === State.Stopped) this.setState("error", "the server stopped");
    });
    try {
      await client.start();
    } catch (e) {
      this.output.error(`gradguard: the server failed to start: ${String(e)}`);
      this.setState("error", "the server failed to start");
      void this.notify("error", "gradguard: the language server failed to start.", "Show Output").then((pick) => {
        if (pick === "Show Output") this.output.show(true);
      });
      return;
    }
    const info = client.initializeResult?.serverInfo;
    this.output.info(`gradguard: server ${info?.name ?? "gradguard"} ${info?.version ?? "?"} is running (${run.command} ${run.args.join(" ")})`);
    this.setState("ready", this.serverVersion(client));
    void this.notify("info", `gradguard ${info?.version ?? ""} is running.`);
  }

  private serverVersion(client: LanguageClient): string {
    const v = client.initializeResult?.serverInfo?.version;
    return v ? `server ${v}` : "server running";
  }

  /** Sends the changed settings to the running server (no restart). */
  pushSettings(): void {
    const client = this.client;
    if (!client || !client.isRunning()) return;
    const settings = this.settingsFor(this.scopeFolder());
    void client.sendNotification(DidChangeConfigurationNotification.type, { settings: { [SECTION]: settings } });
    this.output.info(`gradguard: settings sent to the server: ${JSON.stringify(settings)}`);
  }

  async onConfigurationChanged(e: vscode.ConfigurationChangeEvent): Promise<void> {
    if (!e.affectsConfiguration(SECTION)) return;
    if (e.affectsConfiguration(`${SECTION}.interpreter`)) {
      await this.onEnvironmentMaybeChanged("gradguard.interpreter changed");
      return;
    }
    const enabled = vscode.workspace.getConfiguration(SECTION, this.scopeFolder()).get<boolean>("enable", true);
    if (e.affectsConfiguration(`${SECTION}.enable`) && (enabled ? this.client === undefined : false)) {
      await this.restart();
      return;
    }
    this.pushSettings();
  }

  async fixAll(): Promise<void> {
    const editor = vscode.window.activeTextEditor;
    if (!editor) {
      void vscode.window.showInformationMessage("gradguard: open a Python file first.");
      return;
    }
    const doc = editor.document;
    const outcome = await runFixAll({
      actions: async () => {
        const whole = new vscode.Range(doc.positionAt(0), doc.positionAt(doc.getText().length));
        const all =
          (await vscode.commands.executeCommand<(vscode.CodeAction | vscode.Command)[]>(
            "vscode.executeCodeActionProvider",
            doc.uri,
            whole,
            FIX_ALL_KIND.value,
            10,
          )) ?? [];
        const ours: FixAllAction[] = [];
        for (const a of all) {
          if ("kind" in a && a.kind && FIX_ALL_KIND.contains(a.kind)) ours.push({ edit: a.edit, command: a.command });
        }
        return ours;
      },
      apply: (edit) => vscode.workspace.applyEdit(edit as vscode.WorkspaceEdit),
      run: (command, args) => vscode.commands.executeCommand(command, ...args),
    });
    const msg = describeFixAll(outcome);
    if (outcome.attempts > 1) this.output.info(`gradguard: Fix All needed ${outcome.attempts} requests (an edit was refused as stale)`);
    if (outcome.kind === "refused") {
      this.output.warn(msg);
      void vscode.window.showWarningMessage(msg);
    } else {
      this.output.info(msg);
      vscode.window.setStatusBarMessage(msg, 4000);
    }
  }

  dispose(): void {
    for (const d of this.disposables) d.dispose();
  }

  get languageClient(): LanguageClient | undefined {
    return this.client;
  }
}

function describeSource(source: ResolvedInterpreter["source"]): string {
  return {
    setting: "the gradguard.interpreter setting",
    "python-extension": "the Python extension's active environment",
    path: "PATH",
  }[source];
}

function isExecutable(file: string): boolean {
  try {
    fs.accessSync(file, fs.constants.X_OK);
    return fs.statSync(file).isFile();
  } catch {
    return false;
  }
}

let instance: GradguardClient | undefined;

export async function activate(context: vscode.ExtensionContext): Promise<{ client: () => LanguageClient | undefined }> {
  const output = vscode.window.createOutputChannel("gradguard", { log: true });
  context.subscriptions.push(output);
  output.info(`gradguard extension ${String(context.extension.packageJSON.version)} activated (VS Code ${vscode.version}, UI ${vscode.env.language})`);
  const gg = new GradguardClient(context, output);
  instance = gg;
  context.subscriptions.push(
    gg,
    vscode.commands.registerCommand("gradguard.restart", () => gg.restart()),
    vscode.commands.registerCommand("gradguard.showOutput", () => output.show(true)),
    // Not "gradguard.fixAll": that id is the server's workspace/executeCommand, which
    // vscode-languageclient registers as a VS Code command itself.
    vscode.commands.registerCommand("gradguard.fixAllInFile", () => gg.fixAll()),
    vscode.workspace.onDidChangeConfiguration((e) => gg.onConfigurationChanged(e)),
    vscode.workspace.onDidChangeWorkspaceFolders(() => gg.onEnvironmentMaybeChanged("the workspace folders changed")),
    vscode.extensions.onDidChange(() => {
      // The Python extension was installed or removed: the interpreter may resolve differently.
      void gg.onEnvironmentMaybeChanged("the installed extensions changed");
    }),
  );
  await gg.restart();
  return { client: () => gg.languageClient };
}

export async function deactivate(): Promise<void> {
  await instance?.stop();
}
