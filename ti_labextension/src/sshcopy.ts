// WS3/JOB6: the "copy the SSH command" box of a workspace or job, with SSH turned on or off for a running job. The command is the API's (GET /ssh/command);
// when the SSH gateway is off (404) the box says so instead of offering a button. Copying uses the clipboard
// where the browser allows it (https, or localhost); elsewhere the command stays selected in its field, with a
// line saying to press Ctrl+C.

import { button, errorText, h } from './dom';
import { qs, requestAPI, TiError } from './request';
import { IJob } from './tokens';

interface ISSHCommand {
  command: string;
  login: string;
  host: string;
  port: number;
}

/** Copy ``text``: true when it reached the clipboard. */
export async function copyText(text: string): Promise<boolean> {
  if (!window.isSecureContext || !navigator.clipboard) {
    return false;
  }
  try {
    await navigator.clipboard.writeText(text);
    return true;
  } catch {
    return false;
  }
}

/** Kept across the job detail's redraws (every 2 s): it asks for the command once per job and instance. */
export class SSHCopy {
  readonly node = h('div', { class: 'ti-ssh', id: 'ti-ssh' });
  private key = '';
  private instance = 0;
  private status = h('span', { class: 'ti-hint', id: 'ti-ssh-status', role: 'status', 'aria-live': 'polite' });

  /** Show the box for ``job``: a job that did not ask for SSH gets a line saying how to. */
  update(job: IJob): HTMLElement {
    if (job.kind !== 'workspace' && !(job.endpoints || []).includes('ssh')) {
      this.key = '';
      this.node.replaceChildren(job.status === 'running'
        ? h('div', { class: 'ti-row' }, this.toggle(job, true), this.status)
        : h('p', { class: 'ti-hint', id: 'ti-ssh-hint' },
          'This job did not ask for SSH: turn it on while it runs, or Edit and resubmit it with ssh ticked under Endpoints.'));
      return this.node;
    }
    const key = `${job.name}/${job.instances > 1 ? this.instance : ''}`;
    if (key !== this.key) {
      this.key = key;
      void this.load(job);
    }
    return this.node;
  }

  private async load(job: IJob): Promise<void> {
    const key = this.key;
    let doc: ISSHCommand;
    try {
      doc = await requestAPI<ISSHCommand>(`ssh/command${qs({ name: job.name, instance: job.instances > 1 ? this.instance : null })}`);
    } catch (err) {
      if (key !== this.key) {
        return;
      }
      const off = err instanceof TiError && err.status === 404;
      this.node.replaceChildren(h('p', { class: 'ti-hint', id: 'ti-ssh-hint' },
        off ? 'SSH is not available: the SSH gateway is turned off on this TiHub.' : `SSH command: ${errorText(err)}`));
      return;
    }
    if (key !== this.key) {
      return;
    }
    const field = h('input', { id: 'ti-ssh-command', class: 'ti-ssh-command', readonly: true, value: doc.command,
      'aria-label': 'SSH command', size: Math.min(60, doc.command.length + 2) });
    const copy = button('Copy SSH command', () => void this.copy(field), { id: 'ti-ssh-copy' });
    const parts: (HTMLElement | string)[] = [field, copy];
    if (job.instances > 1) {
      const pick = h('select', { id: 'ti-ssh-instance', 'aria-label': 'SSH into instance' });
      for (let i = 0; i < job.instances; i++) {
        pick.append(h('option', { value: String(i), selected: i === this.instance }, `instance ${i}`));
      }
      pick.addEventListener('change', () => {
        this.instance = parseInt(pick.value, 10);
        this.update(job);
      });
      parts.unshift(pick);
    }
    if (job.kind !== 'workspace' && job.status === 'running') {
      parts.push(this.toggle(job, false));
    }
    this.status.textContent = '';
    this.node.replaceChildren(h('div', { class: 'ti-row' }, ...parts, this.status),
      h('p', { class: 'ti-hint' }, 'Logs in with the SSH keys you registered (ti key add, or My account) while it runs.'));
  }

  /** JOB6: SSH on (or off) for a running job (POST /jobs/{id}/ssh, its owner only); the next redraw shows it. */
  private toggle(job: IJob, on: boolean): HTMLElement {
    return button(on ? 'Turn SSH on' : 'Turn SSH off', () => void this.setSSH(job, on), { id: on ? 'ti-ssh-on' : 'ti-ssh-off' });
  }

  private async setSSH(job: IJob, on: boolean): Promise<void> {
    try {
      await requestAPI<IJob>(`jobs/${job.id}/ssh`, { method: 'POST', json: { enabled: on } });
      this.status.textContent = on ? 'SSH is on: the command appears in a moment' : 'SSH is off for new logins';
    } catch (err) {
      this.status.textContent = `SSH ${on ? 'on' : 'off'}: ${errorText(err)}`;
    }
  }

  private async copy(field: HTMLInputElement): Promise<void> {
    if (await copyText(field.value)) {
      this.status.textContent = 'copied';
      return;
    }
    // no clipboard here (an http address other than localhost): the command stays selected to copy by hand
    field.focus();
    field.select();
    this.status.textContent = 'Press Ctrl+C (⌘C) to copy: this browser allows no clipboard on this address.';
  }
}
