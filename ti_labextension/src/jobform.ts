// The submit form of the Jobs panel (SPEC JOB2, JOB7): every field the API takes, choices loaded from
// the API (plans, images, volumes, credentials, templates), and templates saved and applied here.

import { button, errorText, field, h, message, select } from './dom';
import { guideTable, JOB_KINDS, suits } from './guide';
import { qs, requestAPI } from './request';
import { ICredential, IImagePage, IJob, IPage, IPlan, ITemplate, IVolume, NAME_RE, NAME_RULE } from './tokens';

export interface IJobFormOptions {
  image?: string;
  /** The current virtual cluster: the plan list shows its plans ('' lets the API choose). */
  vc?: () => string;
  onSubmitted: (job: IJob) => void;
  onCancel: () => void;
}

function parseEnv(text: string): Record<string, string> {
  const env: Record<string, string> = {};
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (!line || line.startsWith('#')) {
      continue;
    }
    const eq = line.indexOf('=');
    if (eq <= 0) {
      throw new Error(`environment: "${line}" is not KEY=VALUE`);
    }
    env[line.slice(0, eq).trim()] = line.slice(eq + 1);
  }
  return env;
}

/** "90", "90s", "15m", "2h" -> seconds; empty -> undefined. */
export function parseDuration(text: string): number | undefined {
  const t = text.trim();
  if (!t) {
    return undefined;
  }
  const m = /^(\d+)\s*([smhd]?)$/.exec(t);
  if (!m) {
    throw new Error('estimated duration: a number with an optional unit s, m, h or d (e.g. 90m)');
  }
  const mult: Record<string, number> = { '': 1, s: 1, m: 60, h: 3600, d: 86400 };
  return parseInt(m[1], 10) * mult[m[2]];
}

export class JobForm {
  readonly node: HTMLFormElement;
  private status = h('div', { class: 'ti-form-status', 'aria-live': 'polite' });
  private name = h('input', { id: 'ti-name', name: 'name', required: true, placeholder: 'my-training', autocomplete: 'off' });
  private description = h('input', { name: 'description' });
  private kind = select('kind', [
    { value: 'single', label: 'Single node' },
    { value: 'distributed', label: 'Distributed' }
  ]);
  private strategy = select('strategy', [
    { value: 'allreduce', label: 'All-reduce (PyTorch DDP)' },
    { value: 'ps', label: 'Parameter server' }
  ]);
  private workers = h('input', { name: 'workers', type: 'number', min: 1, value: 2 });
  private ps = h('input', { name: 'ps', type: 'number', min: 1, value: 1 });
  private plan = select('plan', []);
  private image = select('image', []);
  private customImage = h('input', { name: 'image_address', placeholder: 'registry/name:tag' });
  // what this platform does with the image picked (the embedded one runs none), from GET /images
  private imageNote = h('p', { id: 'ti-image-note', class: 'ti-message ti-message-info', role: 'note', hidden: true });
  private credential = select('credential', []);
  private command = h('textarea', { name: 'command', rows: 3, required: true, placeholder: 'python3 train.py' });
  private env = h('textarea', { name: 'env', rows: 2, placeholder: 'KEY=VALUE, one per line' });
  private ports = h('input', { name: 'ports', placeholder: '40000, 40001' });
  private endpoints: HTMLInputElement[] = ['ssh', 'tensorboard', 'jupyter'].map(e =>
    h('input', { type: 'checkbox', name: 'endpoints', value: e })
  );
  private duration = h('input', { name: 'estimated_duration', placeholder: '90m' });
  private template = select('template', []);
  private templateName = h('input', { name: 'template_name', placeholder: 'template name' });
  private volumeRows = h('div', { class: 'ti-volume-rows' });
  private volumes: IVolume[] = [];
  private templates: ITemplate[] = [];
  private distributedOnly: HTMLElement;
  private psOnly: HTMLElement;

  constructor(private readonly opts: IJobFormOptions) {
    this.distributedOnly = h(
      'fieldset',
      { class: 'ti-distributed' },
      h('legend', {}, 'Distributed'),
      field('Strategy', this.strategy),
      field('Workers', this.workers),
      (this.psOnly = field('Parameter servers', this.ps))
    );
    this.node = h(
      'form',
      { class: 'ti-form', id: 'ti-job-form', 'aria-label': 'Submit a training job' },
      h('h3', {}, 'New training job'),
      h('div', { class: 'ti-row' }, field('Template', this.template), button('Apply', () => this.applyTemplate())),
      field('Name', this.name, NAME_RULE),
      field('Description', this.description),
      field('Kind', this.kind, suits(JOB_KINDS, 'single')),
      this.distributedOnly,
      guideTable('ti-kind-guide', JOB_KINDS),
      field('Plan', this.plan, 'resources for each instance'),
      field('Image', this.image),
      field('Or an image address', this.customImage, 'used instead of the list when filled'),
      this.imageNote,
      field('Registry credential', this.credential),
      h('fieldset', {}, h('legend', {}, 'Volumes'), this.volumeRows, button('Add a volume', () => this.addVolumeRow())),
      field('Command', this.command, 'run by a shell in each instance'),
      field('Environment', this.env),
      field('Ports', this.ports, 'interactive ports, 40000-49999, comma separated'),
      h(
        'fieldset',
        { class: 'ti-endpoints' },
        h('legend', {}, 'Endpoints'),
        this.endpoints.map(cb => h('label', {}, cb, ` ${cb.value}`)),
        h('small', { class: 'ti-hint', id: 'ti-endpoints-hint' },
          "none unless ticked: ssh lets you ssh into the job's instances; tensorboard lets you open TensorBoard " +
          "for a log directory in one of its volumes; jupyter runs a Jupyter server beside the job's command " +
          "(opened from the job's detail)")
      ),
      field('Estimated duration', this.duration, 'helps the queue estimate start times, e.g. 90m or 2h'),
      this.status,
      h(
        'div',
        { class: 'ti-row' },
        h('button', { type: 'submit', class: 'ti-button ti-primary' }, 'Submit'),
        // JOB10: checked as a submission, kept out of the queue until it is started from the list
        button('Save as draft', () => void this.submit(true), { id: 'ti-save-draft' }),
        button('Cancel', () => opts.onCancel())
      ),
      h('div', { class: 'ti-row' }, this.templateName, button('Save as template', () => void this.saveTemplate()))
    );
    this.node.addEventListener('submit', ev => {
      ev.preventDefault();
      void this.submit();
    });
    this.name.addEventListener('input', () => this.checkName());
    this.kind.addEventListener('change', () => this.syncKind());
    this.strategy.addEventListener('change', () => this.syncKind());
    this.syncKind();
  }

  /** The name rule said as the user types (the hint turns into the reason; the API checks again on submit). */
  private checkName(): void {
    const typed = this.name.value.trim();
    const bad = typed !== '' && !NAME_RE.test(typed);
    const hint = this.node.querySelector('#ti-name-hint');
    if (hint) {
      hint.textContent = bad ? `'${typed}' cannot be a name: names are ${NAME_RULE}` : NAME_RULE;
      hint.classList.toggle('ti-hint-error', bad);
    }
    this.name.setAttribute('aria-invalid', String(bad));
  }

  private syncKind(): void {
    const distributed = this.kind.value === 'distributed';
    this.distributedOnly.hidden = !distributed;
    this.psOnly.hidden = this.strategy.value !== 'ps';
    const hint = this.node.querySelector(`#${this.kind.id}-hint`);
    if (hint) {
      hint.textContent = suits(JOB_KINDS, distributed ? `distributed, ${this.strategy.value}` : 'single');
    }
    void this.loadPlans();
  }

  private setStatus(kind: 'loading' | 'error' | 'success' | 'info', text: string): void {
    this.status.replaceChildren(message(kind, text));
  }

  /** Load the choices; a failure leaves a message, never an empty form without reason. */
  async load(): Promise<void> {
    this.setStatus('loading', 'Loading plans, images, volumes and templates…');
    try {
      const [images, creds, vols, tpls] = await Promise.all([
        requestAPI<IImagePage>('images?limit=500'),
        requestAPI<IPage<ICredential>>('credentials'),
        requestAPI<IPage<IVolume>>('volumes?limit=500'),
        requestAPI<IPage<ITemplate>>('templates')
      ]);
      this.image.replaceChildren(
        ...images.items.map(i =>
          h('option', { value: i.name, selected: i.address === this.opts.image || i.name === this.opts.image },
            `${i.name} (${i.address})`)
        )
      );
      this.imageNote.textContent = images.image_note || '';
      this.imageNote.hidden = !images.image_note;
      if (this.opts.image && !images.items.some(i => i.address === this.opts.image || i.name === this.opts.image)) {
        this.customImage.value = this.opts.image;
      }
      this.credential.replaceChildren(
        h('option', { value: '' }, '(none)'),
        ...creds.items.map(c => h('option', { value: c.name }, `${c.name} (${c.username}@${c.registry})`))
      );
      this.volumes = vols.items;
      this.templates = tpls.items;
      this.template.replaceChildren(
        h('option', { value: '' }, '(none)'),
        ...tpls.items.map(t => h('option', { value: String(t.id) }, `${t.name}${t.scope === 'team' ? ` (team ${t.group})` : ''}`))
      );
      await this.loadPlans();
      this.status.replaceChildren();
    } catch (err) {
      this.setStatus('error', `Could not load the form's choices: ${errorText(err)}`);
    }
  }

  /** The plans of the current VC for the kind picked (again after the VC changes). */
  async loadPlans(): Promise<void> {
    const vc = this.opts.vc ? this.opts.vc() : '';
    try {
      const plans = await requestAPI<IPage<IPlan>>(`plans${qs({ kind: this.kind.value, vc, limit: 500 })}`);
      const current = this.plan.value;
      this.plan.replaceChildren(
        ...plans.items.map(p =>
          h('option', { value: p.name, selected: p.name === current },
            `${p.name}: ${p.device_count} × ${p.device_type}, ${p.cpu} CPU, ${Math.round(p.memory_mib / 1024)} GiB`)
        )
      );
      this.plan.dataset.vc = vc;
      if (!plans.items.length) {
        this.setStatus('info', `No plan is offered for ${this.kind.value} jobs${vc ? ` in ${vc}` : ''}; ask an admin.`);
      }
    } catch (err) {
      this.setStatus('error', `Could not load plans: ${errorText(err)}`);
    }
  }

  addVolumeRow(volume = '', mountPath = '', readOnly = false): void {
    const vol = select('volume', this.volumes.map(v => ({ value: `${v.owner}/${v.name}`, label: `${v.owner}/${v.name} (${v.kind}${v.access === 'ro' ? ', read-only' : ''})` })), volume);
    const path = h('input', { name: 'mount_path', placeholder: '/mnt/data', value: mountPath });
    const ro = h('input', { type: 'checkbox', name: 'read_only', checked: readOnly });
    const row: HTMLElement = h(
      'div',
      { class: 'ti-row ti-volume-row' },
      field('Volume', vol),
      field('Mount path', path),
      h('label', {}, ro, ' read-only'),
      button('Remove', () => row.remove(), { 'aria-label': 'Remove this volume' })
    );
    if (!this.volumes.length) {
      this.setStatus('info', 'You have no volumes yet: create one in the Storage panel.');
      return;
    }
    this.volumeRows.append(row);
  }

  /** The API's submission object from the form (throws a readable Error on bad local input). */
  spec(): Record<string, unknown> {
    const out: Record<string, unknown> = {
      name: this.name.value.trim(),
      kind: this.kind.value,
      plan: this.plan.value,
      image: this.customImage.value.trim() || this.image.value,
      command: this.command.value
    };
    if (this.description.value.trim()) {
      out.description = this.description.value.trim();
    }
    if (this.kind.value === 'distributed') {
      out.strategy = this.strategy.value;
      out.workers = parseInt(this.workers.value, 10);
      if (this.strategy.value === 'ps') {
        out.ps = parseInt(this.ps.value, 10);
      }
    }
    if (this.credential.value) {
      out.credential = this.credential.value;
    }
    const env = parseEnv(this.env.value);
    if (Object.keys(env).length) {
      out.env = env;
    }
    if (this.ports.value.trim()) {
      out.ports = this.ports.value.trim();
    }
    const endpoints = this.endpoints.filter(cb => cb.checked).map(cb => cb.value);
    if (endpoints.length) {
      out.endpoints = endpoints;
    }
    const volumes = Array.from(this.volumeRows.querySelectorAll('.ti-volume-row')).map(row => {
      const vol = (row.querySelector('select[name=volume]') as HTMLSelectElement).value;
      const path = (row.querySelector('input[name=mount_path]') as HTMLInputElement).value.trim();
      const ro = (row.querySelector('input[name=read_only]') as HTMLInputElement).checked;
      return path ? { volume: vol, mount_path: path, read_only: ro } : { volume: vol, read_only: ro };
    });
    if (volumes.length) {
      out.volumes = volumes;
    }
    const d = parseDuration(this.duration.value);
    if (d !== undefined) {
      out.estimated_duration = d;
    }
    return out;
  }

  /** Fill the form from a job or template spec (clone, apply template). */
  fill(spec: Record<string, any>): void {
    const set = (el: HTMLInputElement | HTMLTextAreaElement | HTMLSelectElement, v: unknown) => {
      if (v !== undefined && v !== null) {
        el.value = String(v);
      }
    };
    set(this.name, spec.name);
    this.checkName();
    set(this.description, spec.description);
    set(this.kind, spec.kind);
    set(this.strategy, spec.strategy);
    set(this.workers, spec.workers);
    set(this.ps, spec.ps);
    set(this.command, spec.command);
    if (spec.plan) {
      this.plan.append(h('option', { value: spec.plan, selected: true }, spec.plan));
    }
    if (spec.image) {
      const known = Array.from(this.image.options).some(o => o.value === spec.image);
      if (known) {
        this.image.value = spec.image;
      } else {
        this.customImage.value = spec.image;
      }
    }
    if (spec.env) {
      this.env.value = Object.entries(spec.env).map(([k, v]) => `${k}=${v}`).join('\n');
    }
    if (spec.ports) {
      this.ports.value = Array.isArray(spec.ports) ? spec.ports.join(', ') : String(spec.ports);
    }
    for (const cb of this.endpoints) {
      cb.checked = Array.isArray(spec.endpoints) && spec.endpoints.includes(cb.value);
    }
    if (spec.estimated_duration) {
      this.duration.value = String(spec.estimated_duration);
    }
    this.volumeRows.replaceChildren();
    for (const v of spec.volumes || []) {
      this.addVolumeRow(v.volume, v.mount_path, v.read_only);
    }
    this.syncKind();
  }

  private applyTemplate(): void {
    const t = this.templates.find(x => String(x.id) === this.template.value);
    if (!t) {
      this.setStatus('info', 'Pick a template first.');
      return;
    }
    this.fill({ ...t.spec, name: this.name.value || t.name });
    this.setStatus('success', `Template ${t.name} applied: check the fields and submit.`);
  }

  private async saveTemplate(): Promise<void> {
    try {
      const spec = this.spec();
      delete spec.name;
      const name = this.templateName.value.trim() || this.name.value.trim();
      const t = await requestAPI<ITemplate>('templates', { method: 'POST', json: { name, spec } });
      this.templates.push(t);
      this.template.append(h('option', { value: String(t.id) }, t.name));
      this.setStatus('success', `Template ${t.name} saved.`);
    } catch (err) {
      this.setStatus('error', `Template not saved: ${errorText(err)}`);
    }
  }

  private async submit(draft = false): Promise<void> {
    let spec: Record<string, unknown>;
    try {
      spec = this.spec();
    } catch (err) {
      this.setStatus('error', (err as Error).message);
      return;
    }
    this.setStatus('loading', draft ? 'Saving the draft…' : 'Submitting…');
    try {
      const job = await requestAPI<IJob>('jobs', { method: 'POST', json: draft ? { ...spec, draft: true } : spec });
      this.setStatus('success', draft ? `Draft ${job.name} saved: start it from the list.` : `Job ${job.name} submitted.`);
      this.opts.onSubmitted(job);
    } catch (err) {
      this.setStatus('error', `${draft ? 'Draft not saved' : 'Not submitted'}: ${errorText(err)}`);
    }
  }
}
