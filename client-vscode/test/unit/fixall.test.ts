import { strict as assert } from "node:assert";
import { test } from "node:test";
import { describeFixAll, runFixAll, type FixAllAction, type FixAllHost } from "../../src/fixall";

/** A host whose editor refuses the first `stale` edits it is given (as VS Code refuses a
 * versioned edit of a document that changed since the server computed it). */
function host(offers: FixAllAction[][], stale = 0) {
  const log: string[] = [];
  let asked = 0;
  const h: FixAllHost = {
    actions: async () => offers[Math.min(asked++, offers.length - 1)],
    apply: async (edit) => {
      if (stale > 0) {
        stale--;
        log.push(`refused ${String(edit)}`);
        return false;
      }
      log.push(`applied ${String(edit)}`);
      return true;
    },
    run: async (command, args) => {
      log.push(`ran ${command}(${args.join(",")})`);
    },
  };
  return { h, log, asked: () => asked };
}

test("fix all applies the offered edit once", async () => {
  const { h, log, asked } = host([[{ edit: "e1" }]]);
  assert.deepEqual(await runFixAll(h), { kind: "applied", attempts: 1 });
  assert.deepEqual(log, ["applied e1"]);
  assert.equal(asked(), 1);
});

test("an edit refused as stale is asked for again, and the fresh one is applied", async () => {
  const { h, log, asked } = host([[{ edit: "v1" }], [{ edit: "v2" }]], 1);
  assert.deepEqual(await runFixAll(h), { kind: "applied", attempts: 2 });
  assert.deepEqual(log, ["refused v1", "applied v2"]);
  assert.equal(asked(), 2);
});

test("a document that keeps changing ends in a clear 'refused', not 'nothing to fix'", async () => {
  const { h, asked } = host([[{ edit: "v" }]], 99);
  const outcome = await runFixAll(h, 3);
  assert.deepEqual(outcome, { kind: "refused", attempts: 3 });
  assert.equal(asked(), 3);
  assert.match(describeFixAll(outcome), /kept changing.*3 tries.*again/);
});

test("no action offered is 'nothing to fix'; a command-only action is run", async () => {
  const none = host([[]]);
  const outcome = await runFixAll(none.h);
  assert.deepEqual(outcome, { kind: "nothing", attempts: 1 });
  assert.equal(describeFixAll(outcome), "gradguard: nothing to fix in this file.");
  const cmd = host([[{ command: { command: "gradguard.fixAll", arguments: ["file:///a.py"] } }]]);
  assert.deepEqual(await runFixAll(cmd.h), { kind: "applied", attempts: 1 });
  assert.deepEqual(cmd.log, ["ran gradguard.fixAll(file:///a.py)"]);
});
