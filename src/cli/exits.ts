// What each command's exit status means, for help, the man pages and docs/commands.md (table.ts names the
// commands that say their own): a monitoring check or a script reads these, so they are said, not guessed.
// It imports nothing: table.ts reads it while the table is built.
/** An exit status and what it means. */
export type Exit = readonly [code: number, meaning: string];

/** What a host command's exit status says, unless the command says otherwise. */
export const HOST_EXITS: readonly Exit[] = [
  [0, "done, or nothing to do"],
  [1, "an apply ran and a step failed (or it was interrupted), or the link could not be held"],
  [
    2,
    "refused: bad input or flags, a declaration the schema or the rules refuse, the wrong mode; nothing changed",
  ],
];

/** What an operator's command's exit status says, unless the command says otherwise. */
export const MESH_EXITS: readonly Exit[] = [
  [0, "done"],
  [
    1,
    "it could not be done: no server of the bus answered (nothing read or changed), a server died, a file could not be written",
  ],
  [2, "refused: bad or stale input, one line on stderr; nothing changed"],
];

export const ENROL_EXITS: readonly Exit[] = [
  [0, "enrolled: the membership and the node's name are saved"],
  [1, "the bus could not be reached or did not answer"],
  [
    2,
    "refused: a malformed code, bad flags, a node already enrolled (without --replace), a code the bus refuses (wrong, already used or withdrawn), or the mesh's own refusal; nothing changed",
  ],
];

export const STATUS_EXITS: readonly Exit[] = [
  [0, "all is well"],
  [1, "the last apply failed, or an enrolled node's link is down"],
  [2, "refused: bad flags, or a state directory this user may not read"],
];

export const PUSH_EXITS: readonly Exit[] = [
  [0, "every node applied it (or --wait-s 0: it was sent)"],
  [1, "a node's apply failed, or was superseded by a newer declaration; or no server of the bus answered"],
  [
    2,
    "refused here (nothing sent, no serial used; a node would lose resources without --allow-removals), or a node refused the declaration",
  ],
  [3, "a node said nothing within --wait-s"],
];

export const PLAN_EXITS: readonly Exit[] = [
  [0, "every node answered with its plan"],
  [2, "refused here (nothing sent), or a node would refuse the declaration"],
  [3, "a node is not on the bus, or did not answer within --wait-s"],
];

export const ROLLOUT_EXITS: readonly Exit[] = [
  [0, "every node applied it and was healthy"],
  [1, "it finished, but a node failed within --max-failed (or it was aborted)"],
  [2, "refused here: bad input, or a node would lose resources without --allow-removals; nothing sent"],
  [4, "halted: more nodes failed, refused or stayed silent than --max-failed allows"],
];

export const MOVE_EXITS: readonly Exit[] = [
  [0, "the node applied its move and now dials the other mesh"],
  [1, "its apply failed, or was superseded"],
  [2, "refused here, or by the node"],
  [3, "the node said nothing within --wait-s"],
];
