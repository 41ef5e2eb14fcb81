// VS Code settings (section `gradguard`) → the table the server reads from
// initializationOptions, workspace/didChangeConfiguration and workspace/configuration.
// Pure: no `vscode` import (unit-tested in test/unit/settings.test.ts).
//
// Only the keys the server understands are sent; client-only keys (interpreter,
// showNotifications, trace) stay here. Values are normalised the way the settings UI
// would write them, and anything malformed (hand-edited settings.json) is dropped with
// a message for the output channel instead of being forwarded.

export type RunMode = "onType" | "onSave";
export type Language = "auto" | "en" | "zh-cn";
export type SeverityName = "error" | "warning" | "information" | "hint";
export type LogLevel = "off" | "error" | "warning" | "info" | "debug";

export interface ServerSettings {
  enable: boolean;
  select: string[];
  ignore: string[];
  severity: Record<string, SeverityName>;
  run: RunMode;
  language: Language;
  debounce: number;
  logLevel: LogLevel;
  unverifiedNotes: boolean;
}

export const DEFAULTS: Readonly<ServerSettings> = Object.freeze({
  enable: true,
  select: [],
  ignore: [],
  severity: {},
  run: "onType",
  language: "auto",
  debounce: 300,
  logLevel: "info",
  unverifiedNotes: false,
});

/** Reads one key of the `gradguard` section (e.g. `config.get`). */
export type Reader = (key: string) => unknown;

export interface Mapped {
  settings: ServerSettings;
  problems: string[];
}

const CODE = /^(ALL|GG\d*)$/;

function codes(value: unknown, key: string, problems: string[]): string[] {
  if (value === undefined || value === null) return [];
  const list = typeof value === "string" ? value.split(",") : value;
  if (!Array.isArray(list)) {
    problems.push(`gradguard.${key} must be a list of rule codes like ["GG101"]; ignored`);
    return [];
  }
  const out: string[] = [];
  for (const item of list) {
    const code = typeof item === "string" ? item.trim().toUpperCase() : "";
    if (code === "") continue;
    if (!CODE.test(code)) {
      problems.push(`gradguard.${key}: ${JSON.stringify(item)} is not a gradguard rule code (GGnnn); ignored`);
      continue;
    }
    if (!out.includes(code)) out.push(code);
  }
  return out;
}

const SEVERITY_ALIASES: Record<string, SeverityName> = {
  error: "error",
  err: "error",
  warning: "warning",
  warn: "warning",
  information: "information",
  info: "information",
  hint: "hint",
};

function severities(value: unknown, problems: string[]): Record<string, SeverityName> {
  if (value === undefined || value === null) return {};
  if (typeof value !== "object" || Array.isArray(value)) {
    problems.push('gradguard.severity must be an object like { "GG102": "warning" }; ignored');
    return {};
  }
  const out: Record<string, SeverityName> = {};
  for (const [rawCode, rawLevel] of Object.entries(value as Record<string, unknown>)) {
    const code = rawCode.trim().toUpperCase();
    const level = typeof rawLevel === "string" ? SEVERITY_ALIASES[rawLevel.trim().toLowerCase()] : undefined;
    if (!CODE.test(code) || code === "ALL" || code === "GG") {
      problems.push(`gradguard.severity: ${JSON.stringify(rawCode)} is not a rule code; ignored`);
    } else if (!level) {
      problems.push(
        `gradguard.severity.${code}: ${JSON.stringify(rawLevel)} is not one of error, warning, information, hint; ignored`,
      );
    } else {
      out[code] = level;
    }
  }
  return out;
}

function oneOf<T extends string>(value: unknown, allowed: readonly T[], key: string, fallback: T, problems: string[]): T {
  if (value === undefined || value === null) return fallback;
  if (typeof value === "string") {
    const v = value.trim().toLowerCase().replace(/_/g, "-");
    const hit = allowed.find((a) => a.toLowerCase() === v);
    if (hit) return hit;
  }
  problems.push(`gradguard.${key}: ${JSON.stringify(value)} is not one of ${allowed.join(", ")}; using ${fallback}`);
  return fallback;
}

export function toServerSettings(read: Reader): Mapped {
  const problems: string[] = [];
  const enableRaw = read("enable");
  let enable = DEFAULTS.enable;
  if (typeof enableRaw === "boolean") enable = enableRaw;
  else if (enableRaw !== undefined && enableRaw !== null) problems.push("gradguard.enable must be true or false; using true");

  let language = read("language");
  if (typeof language === "string" && ["zh", "zh-hans", "zh_cn", "chinese"].includes(language.trim().toLowerCase())) {
    language = "zh-cn";
  }

  let debounce = DEFAULTS.debounce;
  const debounceRaw = read("debounce");
  if (typeof debounceRaw === "number" && Number.isFinite(debounceRaw) && debounceRaw >= 0) {
    debounce = Math.min(Math.round(debounceRaw), 60_000);
  } else if (debounceRaw !== undefined && debounceRaw !== null) {
    problems.push(`gradguard.debounce: ${JSON.stringify(debounceRaw)} is not a number of milliseconds; using ${DEFAULTS.debounce}`);
  }

  const notesRaw = read("unverifiedNotes");
  let unverifiedNotes = DEFAULTS.unverifiedNotes;
  if (typeof notesRaw === "boolean") unverifiedNotes = notesRaw;
  else if (notesRaw !== undefined && notesRaw !== null) problems.push("gradguard.unverifiedNotes must be true or false; using false");

  const settings: ServerSettings = {
    enable,
    select: codes(read("select"), "select", problems),
    ignore: codes(read("ignore"), "ignore", problems),
    severity: severities(read("severity"), problems),
    run: oneOf(read("run"), ["onType", "onSave"] as const, "run", DEFAULTS.run, problems),
    language: oneOf(language, ["auto", "en", "zh-cn"] as const, "language", DEFAULTS.language, problems),
    debounce,
    logLevel: oneOf(read("logLevel"), ["off", "error", "warning", "info", "debug"] as const, "logLevel", DEFAULTS.logLevel, problems),
    unverifiedNotes,
  };
  return { settings, problems };
}

/** Settings keys whose change needs a new server process rather than a didChangeConfiguration. */
export const RESTART_KEYS = ["interpreter"] as const;

export type NotificationLevel = "off" | "onError" | "always";

export function shouldNotify(setting: unknown, kind: "error" | "info"): boolean {
  const level: NotificationLevel = setting === "off" || setting === "always" ? setting : "onError";
  if (level === "off") return false;
  if (level === "always") return true;
  return kind === "error";
}
