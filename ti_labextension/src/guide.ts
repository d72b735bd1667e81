// DEV7: which kind of job and which kind of storage suits which work, shown where the choice is made.
// The same words as ti_hub/domain/guidance.py (the CLI's help); tests/browser/test_lab_panels.py checks both agree.

import { h } from './dom';

/** [what you pick, what it suits] */
export type GuideRow = [string, string];

export const JOB_KINDS: GuideRow[] = [
  ['single', "training that fits on one machine's devices, or runs on CPU: most jobs"],
  ['distributed, allreduce', 'data-parallel training over 2 or more workers with PyTorch DDP (torchrun)'],
  ['distributed, ps', 'TensorFlow parameter-server training (TF_CONFIG): parameter servers plus workers'],
  ['workspace', 'interactive work (notebooks, trying code, debugging): start a workspace, not a job']
];

export const STORAGE_KINDS: GuideRow[] = [
  ['work directory', 'your code and results: /mnt/USER is in every workspace and job of yours, nothing to create'],
  ['filesystem', 'data, checkpoints and logs that several jobs or people read and write at once'],
  ['block', "one job's data: one read-write mount at a time, or many read-only ones"],
  ['local', 'scratch (caches, unpacked files): fresh for each job or workspace, gone when it ends'],
  ['dataset', 'fixed training data: a read-only snapshot of a volume, so every run reads the same files'],
  ['bucket', 'shared data that admins create and fill: read-only to users']
];

/** What the row named `what` suits ('' for none). */
export function suits(rows: GuideRow[], what: string): string {
  const row = rows.find(r => r[0] === what);
  return row ? row[1] : '';
}

/** The whole table, folded under "Which should I use?" beside the choice. */
export function guideTable(id: string, rows: GuideRow[]): HTMLElement {
  return h(
    'details',
    { class: 'ti-guide', id },
    h('summary', {}, 'Which should I use?'),
    h('dl', {}, rows.flatMap(([what, text]) => [h('dt', {}, what), h('dd', {}, text)]))
  );
}
