// `tsx scripts/strays.ts RUN`: the long-lived processes test run RUN (its MESH_TEST_RUN) left running, one line
// each, SIGKILLed once listed; exit 1 when there were any. .ci/run calls it after `npm test`.
import { describeStrays, GONE_WAIT_MS, killStrays, lingering } from "../test/support/strays.ts";

const run = process.argv[2];
if (!run) {
  process.stderr.write("usage: tsx scripts/strays.ts RUN (the MESH_TEST_RUN the tests ran with)\n");
  process.exit(2);
}
const strays = await lingering(run, GONE_WAIT_MS);
if (strays.length) {
  process.stdout.write(`${describeStrays(strays)}\n`);
  killStrays(strays);
  process.exitCode = 1;
}
