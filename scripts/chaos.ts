// `npm run test:chaos [-- --long] [--only KEY[,KEY]] [--seed N]`: every chaos scenario of issue 9, then the
// table (scenario, tried, held). The short form is what `npm test` runs; --long is the full counts.
// Exit 1 when anything did not hold.
import { parseArgs } from "node:util";
import { details, type Row, SCENARIOS, table } from "../test/chaos/index.ts";
import { removeTemps, seedFrom } from "../test/chaos/support.ts";

const { values } = parseArgs({
  args: process.argv.slice(2),
  options: {
    long: { type: "boolean", default: false },
    only: { type: "string" },
    seed: { type: "string" },
    quiet: { type: "boolean", default: false },
  },
});

const seed = seedFrom(values.seed ?? process.env.CHAOS_SEED);
const only = values.only?.split(",");
const chosen = SCENARIOS.filter((s) => !only || only.includes(s.key));
if (!chosen.length) {
  process.stderr.write(
    `chaos: no scenario matches --only ${values.only} (keys: ${SCENARIOS.map((s) => s.key).join(", ")})\n`,
  );
  process.exit(2);
}

const say = (line: string) => {
  if (!values.quiet) process.stderr.write(`${line}\n`);
};
say(`chaos: ${values.long ? "long" : "short"} form, seed ${seed} (replay with --seed ${seed})`);

const rows: Row[] = [];
for (const scenario of chosen) {
  const started = performance.now();
  say(`chaos: ${scenario.title} …`);
  const outcome = await scenario.run({ long: values.long, seed, progress: values.quiet ? undefined : say });
  rows.push({ scenario, outcome, seconds: (performance.now() - started) / 1000 });
}
removeTemps();

process.stdout.write(
  `\nmesh-host chaos, ${values.long ? "long" : "short"} form, seed ${seed}\n\n${table(rows)}\n${details(rows)}\n`,
);
const failed = rows.filter((r) => r.outcome.held !== r.outcome.tried || r.outcome.failures.length);
process.exitCode = failed.length ? 1 : 0;
