// A fault of the machine (errno) in our words: what could not be done to which path, and what to do about it.

const WORDS: Record<string, string> = {
  EACCES: "permission denied",
  EPERM: "not permitted",
  ENOTDIR: "a part of the path is not a directory",
  EISDIR: "it is a directory",
  ENOENT: "it does not exist",
  ENOSPC: "no space left on the device",
  EROFS: "the file system is read-only",
  ELOOP: "too many symbolic links",
  EEXIST: "it exists already",
  ENAMETOOLONG: "the name is too long",
  EMFILE: "too many open files",
  EIO: "an input/output error",
  EBUSY: "it is busy",
  EXDEV: "it is on another file system",
  EDQUOT: "over the disk quota",
  ENOTEMPTY: "the directory is not empty",
  ENFILE: "too many open files on this machine",
  ETXTBSY: "the program is being written",
  ENOEXEC: "not a program this machine can run",
};

/** `code` in words with the code after it, for a search ("no space left on the device (ENOSPC)"). */
export function errnoWords(code: string | undefined): string {
  if (!code) return "an error the system did not name";
  const words = WORDS[code];
  return words ? `${words} (${code})` : code;
}

const VERBS: Record<string, string> = {
  open: "open",
  read: "read",
  mkdir: "make the directory",
  rename: "rename",
  unlink: "remove",
  scandir: "list",
  stat: "look at",
  lstat: "look at",
  write: "write",
  chmod: "change the mode of",
  chown: "change the owner of",
  fsync: "sync",
};

/**
 * "cannot open /x: permission denied", or null when `e` is no errno error. `path`: the file meant, where the
 * error names none (a write's ENOSPC carries no path) or names a temporary beside it.
 */
export function faultLine(e: unknown, doing?: string, path?: string): string | null {
  const err = e as NodeJS.ErrnoException;
  if (!err || typeof err.code !== "string" || !/^E[A-Z]+$/.test(err.code)) return null;
  const words = WORDS[err.code] ?? err.code;
  const verb = doing ?? (err.syscall && VERBS[err.syscall]) ?? "use";
  const at = path ?? err.path;
  return at ? `cannot ${verb} ${at}: ${words}` : `${words} (${err.code})`;
}

/** Whether the fault is one of permission: the answer is who runs the command. */
export function deniedFault(e: unknown): boolean {
  const code = (e as NodeJS.ErrnoException)?.code;
  return code === "EACCES" || code === "EPERM";
}
