// "gradguard: Fix All in File", without the vscode API (so it is unit-tested):
// ask for the fix-all actions, apply their edits, and ask again when an edit is refused.
//
// The server's fix-all edit is versioned: VS Code refuses it when the document changed
// after the server computed it (a keystroke, a format-on-type, a reload from disk while
// the request was in flight). That is not "nothing to fix", so the command asks for a
// fresh edit, a few times, and says plainly when it still could not apply one.

/** One fix-all action as the command sees it: an edit to apply and/or a command to run. */
export interface FixAllAction {
  edit?: unknown;
  command?: { command: string; arguments?: unknown[] };
}

export interface FixAllHost {
  /** The fix-all actions the server offers for the document now. */
  actions(): PromiseLike<FixAllAction[]>;
  /** Applies a workspace edit; false when the editor refused it. */
  apply(edit: unknown): PromiseLike<boolean>;
  run(command: string, args: unknown[]): PromiseLike<unknown>;
}

export type FixAllOutcome =
  | { kind: "applied"; attempts: number }
  | { kind: "nothing"; attempts: number }
  | { kind: "refused"; attempts: number };

export async function runFixAll(host: FixAllHost, maxAttempts = 3): Promise<FixAllOutcome> {
  let attempts = 0;
  while (attempts < maxAttempts) {
    attempts++;
    const actions = await host.actions();
    if (actions.length === 0) return { kind: "nothing", attempts };
    let applied = 0;
    let refused = 0;
    for (const action of actions) {
      if (action.edit !== undefined) {
        if (await host.apply(action.edit)) applied++;
        else refused++;
      }
      if (action.command) {
        await host.run(action.command.command, action.command.arguments ?? []);
        applied++;
      }
    }
    if (refused === 0) return applied > 0 ? { kind: "applied", attempts } : { kind: "nothing", attempts };
  }
  return { kind: "refused", attempts };
}

export function describeFixAll(outcome: FixAllOutcome): string {
  switch (outcome.kind) {
    case "applied":
      return "gradguard: applied the fixes in this file.";
    case "nothing":
      return "gradguard: nothing to fix in this file.";
    case "refused":
      return `gradguard: the file kept changing while the fixes were computed (${outcome.attempts} tries); run Fix All again.`;
  }
}
