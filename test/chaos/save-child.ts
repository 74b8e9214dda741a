// The child scenario 2 kills: writes two state files again and again, alternating between two known contents.
// argv: MODE(atomic|plain) DIR RECORDS_A RECORDS_B MEMBERSHIP_A MEMBERSHIP_B — the four contents as files.
// `plain` writes in place with writeFileSync: the control that shows the check can see a torn file.
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { writeFileAtomicSync } from "../../src/durable/index.ts";

const [mode, dir, ra, rb, ma, mb] = process.argv.slice(2) as [string, string, string, string, string, string];
const records = [readFileSync(ra), readFileSync(rb)];
const membership = [readFileSync(ma), readFileSync(mb)];
const write =
  mode === "plain"
    ? (path: string, data: Buffer) => writeFileSync(path, data)
    : (path: string, data: Buffer) => writeFileAtomicSync(path, data, 0o600);

write(join(dir, "records.json"), records[0]!);
write(join(dir, "membership.json"), membership[0]!);
process.stdout.write("ready\n");
for (let k = 1; ; k++) {
  write(join(dir, "records.json"), records[k % 2]!);
  write(join(dir, "membership.json"), membership[k % 2]!);
}
