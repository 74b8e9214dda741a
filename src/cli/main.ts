// The executable's entry: run the CLI, then let the process exit with its status.
import { main } from "./cli.ts";

main(process.argv.slice(2)).then((code) => {
  process.exitCode = code;
});
