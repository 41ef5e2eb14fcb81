import { strict as assert } from "node:assert";
import { readFileSync } from "node:fs";
import * as path from "node:path";
import { test } from "node:test";
import { DEFAULTS, shouldNotify, toServerSettings } from "../../src/settings";

const read = (o: Record<string, unknown>) => (k: string) => o[k];

test("defaults when nothing is set", () => {
  const { settings, problems } = toServerSettings(read({}));
  assert.deepEqual(settings, { ...DEFAULTS });
  assert.deepEqual(problems, []);
});

test("all keys are mapped and normalised; client-only keys are not sent", () => {
  const { settings, problems } = toServerSettings(
    read({
      enable: false,
      select: ["gg101", " GG1 "],
      ignore: "GG102, gg103",
      severity: { gg102: "Warning", GG101: "info" },
      run: "onsave",
      language: "zh",
      debounce: 120.4,
      logLevel: "DEBUG",
      unverifiedNotes: true,
      interpreter: "/x/python",
      showNotifications: "off",
    }),
  );
  assert.deepEqual(problems, []);
  assert.deepEqual(settings, {
    enable: false,
    select: ["GG101", "GG1"],
    ignore: ["GG102", "GG103"],
    severity: { GG102: "warning", GG101: "information" },
    run: "onSave",
    language: "zh-cn",
    debounce: 120,
    logLevel: "debug",
    unverifiedNotes: true,
  });
  assert.ok(!("interpreter" in settings));
});

test("malformed values are dropped with a message, never forwarded", () => {
  const { settings, problems } = toServerSettings(
    read({
      enable: "yes",
      select: ["GG101", "E501", 7],
      severity: { GG101: "fatal", nope: "error", GG102: "hint" },
      run: "always",
      language: "fr",
      debounce: -5,
      logLevel: 3,
      unverifiedNotes: "yes",
    }),
  );
  assert.equal(settings.enable, true);
  assert.deepEqual(settings.select, ["GG101"]);
  assert.deepEqual(settings.severity, { GG102: "hint" });
  assert.equal(settings.run, "onType");
  assert.equal(settings.language, "auto");
  assert.equal(settings.debounce, 300);
  assert.equal(settings.logLevel, "info");
  assert.equal(settings.unverifiedNotes, false);
  for (const word of ["enable", "E501", "fatal", "nope", "run", "language", "debounce", "logLevel", "unverifiedNotes"]) {
    assert.ok(problems.some((p) => p.includes(word)), `a problem mentions ${word}: ${problems.join(" | ")}`);
  }
});

test("showNotifications levels", () => {
  assert.equal(shouldNotify("off", "error"), false);
  assert.equal(shouldNotify("onError", "error"), true);
  assert.equal(shouldNotify("onError", "info"), false);
  assert.equal(shouldNotify(undefined, "error"), true);
  assert.equal(shouldNotify("always", "info"), true);
});

test("package.json contributes every setting the client reads, with a description and matching default", () => {
  const pkg = JSON.parse(readFileSync(path.join(__dirname, "..", "..", "package.json"), "utf8"));
  const props = pkg.contributes.configuration.properties as Record<string, { default: unknown; description?: string; markdownDescription?: string; enum?: string[] }>;
  const required = ["enable", "interpreter", "run", "select", "ignore", "severity", "language", "showNotifications", "trace.server", "debounce", "logLevel", "unverifiedNotes"];
  for (const key of required) {
    const p = props[`gradguard.${key}`];
    assert.ok(p, `gradguard.${key} is contributed`);
    assert.ok(p.description || p.markdownDescription, `gradguard.${key} has a description`);
  }
  for (const key of Object.keys(DEFAULTS) as (keyof typeof DEFAULTS)[]) {
    assert.deepEqual(props[`gradguard.${key}`].default, DEFAULTS[key], `default of gradguard.${key}`);
  }
  // the enum a user picks from maps without complaint
  for (const key of ["run", "language", "logLevel"]) {
    for (const value of props[`gradguard.${key}`].enum ?? []) {
      assert.deepEqual(toServerSettings(read({ [key]: value })).problems, [], `${key}=${value}`);
    }
  }
  const commands = (pkg.contributes.commands as { command: string }[]).map((c) => c.command).sort();
  assert.deepEqual(commands, ["gradguard.fixAllInFile", "gradguard.restart", "gradguard.showOutput"]);
  assert.equal(pkg.extensionDependencies, undefined, "the Python extension stays optional");
});
