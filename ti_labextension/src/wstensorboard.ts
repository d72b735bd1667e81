// WS3: TensorBoard for a log directory of the workspace this JupyterLab runs in, started by TiHub like a job's
// (POST /jobs/{workspace}/tensorboard): the directory must lie in one of the workspace's volume mounts (not a
// `local` scratch volume), and TiHub reads it from that volume only.

import { PageConfig } from '@jupyterlab/coreutils';
import { errorText, h, message } from './dom';
import { requestAPI } from './request';
import { IJob } from './tokens';

/** The TiHub name of the workspace this page belongs to ('' outside a hub). */
export function thisWorkspace(): string {
  if (!PageConfig.getOption('hubUser')) {
    return '';
  }
  return PageConfig.getOption('hubServerName') || 'default';
}

/** A folded "TensorBoard" section for this workspace, or null outside a hub. */
export function workspaceTensorBoard(): HTMLElement | null {
  const ws = thisWorkspace();
  if (!ws) {
    return null;
  }
  const logdir = h('input', { name: 'logdir', placeholder: '/mnt/VOLUME/tb', 'aria-label': 'Log directory', size: 28 });
  const status = h('div', { class: 'ti-form-status', 'aria-live': 'polite' });
  const form = h('form', { class: 'ti-row', id: 'ti-ws-tensorboard-form', 'aria-label': 'Open TensorBoard for this workspace' },
    logdir, h('button', { type: 'submit', class: 'ti-button' }, 'Open TensorBoard'));
  const hint = h('p', { class: 'ti-hint', id: 'ti-ws-tensorboard-hint' },
    `A log directory inside one of this workspace's (${ws}) volume mounts.`);
  const section = h('details', { class: 'ti-ws-tensorboard', id: 'ti-ws-tensorboard' },
    h('summary', {}, 'TensorBoard for this workspace'), hint, form, status);
  let looked = false;
  section.addEventListener('toggle', () => {
    if (!section.open || looked) {
      return;
    }
    looked = true;
    void requestAPI<IJob>(`jobs/${encodeURIComponent(ws)}`).then(job => {
      const mounts = (job.volumes || []).filter(v => v.kind !== 'local').map(v => v.mount_path);
      if (mounts.length) {
        logdir.placeholder = `${mounts[0].replace(/\/+$/, '')}/tb`;
        hint.textContent = `A log directory inside one of this workspace's volume mounts: ${mounts.join(', ')}.`;
      } else {
        hint.textContent = 'This workspace has no volume TensorBoard can read (local scratch volumes cannot be read): ' +
          'start it with a filesystem volume and write the logs there.';
      }
    }, () => undefined);
  });
  form.addEventListener('submit', ev => {
    ev.preventDefault();
    status.replaceChildren(message('loading', 'Starting TensorBoard…'));
    void requestAPI<{ url: string }>(`jobs/${encodeURIComponent(ws)}/tensorboard`, { method: 'POST', json: { logdir: logdir.value.trim() } })
      .then(tb => {
        status.replaceChildren(h('p', { class: 'ti-message ti-message-success', role: 'status' },
          'TensorBoard is ready: ', h('a', { href: tb.url, target: '_blank', rel: 'noopener', id: 'ti-ws-tensorboard-link' }, tb.url)));
        window.open(tb.url, '_blank', 'noopener');
      }, err => status.replaceChildren(message('error', `TensorBoard: ${errorText(err)}`)));
  });
  return section;
}
