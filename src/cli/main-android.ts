// The Android executable's entry, and its composition root: the portable floor only (file, directory, action).
// Nothing of the Arch host (systemd, pacman, processes, containers, the overlay) nor the operator's half is
// named here, so none of it is in the bundle; a command asking for one refuses in one line.
import { start } from "./start.ts";

start({ appliers: async () => ({}), commands: {} });
