// The Images panel (SPEC IMG1-IMG3): public images (version, size and creation time as their registry says them),
// my registry credentials, and a custom address;
// "Use for a job" opens the Jobs panel's form with the image chosen.

import { button, bytes, errorText, field, h, message, PollingPanel, table, when } from './dom';
import { requestAPI } from './request';
import { ICredential, IImagePage, IPage } from './tokens';

export class ImagesPanel extends PollingPanel {
  private listArea = h('section', { id: 'ti-images', 'aria-live': 'polite' });
  private credArea = h('section', { id: 'ti-credentials' });
  private status = h('div', { class: 'ti-form-status', 'aria-live': 'polite' });

  constructor(private readonly useImage: (address: string) => void) {
    super(30000);
    this.id = 'ti-images-panel';
    this.title.caption = 'TiHub images';
    this.addClass('ti-panel');
    const address = h('input', { name: 'address', placeholder: 'registry.example.com/team/image:tag' });
    const custom = h(
      'form',
      { class: 'ti-form ti-inline', id: 'ti-custom-image', 'aria-label': 'Use a custom image' },
      h('h3', {}, 'A custom image'),
      field('Address', address, 'private registries need a credential below'),
      h('button', { type: 'submit', class: 'ti-button' }, 'Use for a job')
    );
    custom.addEventListener('submit', ev => {
      ev.preventDefault();
      if (!address.value.trim()) {
        this.status.replaceChildren(message('error', 'Give an image address first.'));
        return;
      }
      this.useImage(address.value.trim());
    });
    const name = h('input', { name: 'name', placeholder: 'my-registry', required: true });
    const registry = h('input', { name: 'registry', placeholder: 'registry.example.com', required: true });
    const username = h('input', { name: 'username', required: true, autocomplete: 'off' });
    const password = h('input', { name: 'password', type: 'password', required: true, autocomplete: 'new-password' });
    const credForm = h(
      'form',
      { class: 'ti-form ti-inline', id: 'ti-credential-form', 'aria-label': 'Save a registry credential' },
      h('h3', {}, 'New registry credential'),
      field('Name', name),
      field('Registry', registry),
      field('Username', username),
      field('Password or token', password, 'stored encrypted; never shown again'),
      h('button', { type: 'submit', class: 'ti-button' }, 'Save')
    );
    credForm.addEventListener('submit', ev => {
      ev.preventDefault();
      void this.run(this.status, 'Credential saved.', async () => {
        await requestAPI<ICredential>('credentials', {
          method: 'POST',
          json: { name: name.value.trim(), registry: registry.value.trim(), username: username.value, password: password.value }
        });
        password.value = '';
      });
    });
    this.node.append(
      h('div', { class: 'ti-toolbar' }, h('h2', {}, 'Images'), button('Refresh', () => void this.tick())),
      this.status,
      this.listArea,
      custom,
      this.credArea,
      credForm
    );
    this.listArea.append(message('loading', 'Loading images…'));
  }

  protected async refresh(): Promise<void> {
    try {
      const [images, creds] = await Promise.all([
        requestAPI<IImagePage>('images?limit=500'),
        requestAPI<IPage<ICredential>>('credentials')
      ]);
      this.listArea.replaceChildren(
        h('h3', {}, 'Public images'),
        images.image_note ? h('p', { id: 'ti-images-note', class: 'ti-message ti-message-info', role: 'note' }, images.image_note) : '',
        images.items.length
          ? table(['Image', 'Address', 'Version', 'Size', 'Created', 'For', ''], images.items.map(i => [
              i.name,
              // what the registry said when it could not be read (unreachable, denied, ...), under the address
              h('div', {}, h('code', {}, i.address),
                i.registry && i.registry !== 'ok' ? h('div', { class: 'ti-hint ti-image-registry' }, i.registry) : ''),
              i.version || '',
              i.registry === 'ok' ? bytes(i.size_bytes) : '',
              when(i.image_created),
              [i.accelerator, i.description].filter(Boolean).join(' — '),
              button('Use for a job', () => this.useImage(i.name), { 'aria-label': `Use ${i.name} for a job` })
            ]), { id: 'ti-images-table' })
          : message('empty', 'No public images yet; an admin adds them. You can still use a custom address below.')
      );
      this.credArea.replaceChildren(
        h('h3', {}, 'My registry credentials'),
        creds.items.length
          ? table(['Name', 'Registry', 'Username', ''], creds.items.map(c => [c.name, c.registry, c.username,
              button('Delete', () => void this.run(this.status, `Credential ${c.name} deleted.`, async () => {
                await requestAPI(`credentials/${c.id}`, { method: 'DELETE' });
              }), { 'aria-label': `Delete credential ${c.name}` })]))
          : message('empty', 'No registry credentials saved.')
      );
    } catch (err) {
      this.listArea.replaceChildren(message('error', `Could not load images: ${errorText(err)}`));
    }
  }
}
