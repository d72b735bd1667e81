// TiHub's JupyterLab plugin: three sidebar panels (Jobs, Storage, Images) and commands to open them.

import { ILabShell, JupyterFrontEnd, JupyterFrontEndPlugin } from '@jupyterlab/application';
import { ICommandPalette } from '@jupyterlab/apputils';
import { LabIcon } from '@jupyterlab/ui-components';
import { ImagesPanel } from './images';
import { JobsPanel } from './jobs';
import { requestAPI } from './request';
import { StoragePanel } from './storage';
import { CommandIDs, PLUGIN_ID } from './tokens';

const svg = (path: string) =>
  `<svg xmlns="http://www.w3.org/2000/svg" width="16" height="16" viewBox="0 0 24 24"><path class="jp-icon3" fill="#616161" d="${path}"/></svg>`;

const jobsIcon = new LabIcon({
  name: 'ti-labextension:jobs',
  svgstr: svg('M4 4h16v4H4zm0 6h10v4H4zm0 6h13v4H4zm14-6h2v4h-2z')
});
const storageIcon = new LabIcon({
  name: 'ti-labextension:storage',
  svgstr: svg('M4 5c0-1.7 3.6-3 8-3s8 1.3 8 3v14c0 1.7-3.6 3-8 3s-8-1.3-8-3zm2 4.2V12c0 .6 2.5 2 6 2s6-1.4 6-2V9.2C16.5 10 14.4 10.5 12 10.5S7.5 10 6 9.2zm0 5V17c0 .6 2.5 2 6 2s6-1.4 6-2v-2.8c-1.5.8-3.6 1.3-6 1.3s-4.5-.5-6-1.3z')
});
const imagesIcon = new LabIcon({
  name: 'ti-labextension:images',
  svgstr: svg('M12 2l9 5v10l-9 5-9-5V7zm0 2.3L5.5 8 12 11.7 18.5 8zM5 9.7v6.1l6 3.4v-6.1zm14 0l-6 3.4v6.1l6-3.4z')
});

const plugin: JupyterFrontEndPlugin<void> = {
  id: PLUGIN_ID,
  description: 'TiHub panels: training jobs, storage and images',
  autoStart: true,
  requires: [ILabShell],
  optional: [ICommandPalette],
  activate: (app: JupyterFrontEnd, shell: ILabShell, palette: ICommandPalette | null) => {
    let me = '';
    void requestAPI<{ name: string }>('me').then(
      u => (me = u.name),
      err => console.warn('TiHub: cannot read the current user', err)
    );
    const jobs = new JobsPanel(() => me);
    jobs.title.icon = jobsIcon;
    const storage = new StoragePanel(() => me);
    storage.title.icon = storageIcon;
    const images = new ImagesPanel(address => void app.commands.execute(CommandIDs.newJob, { image: address }));
    images.title.icon = imagesIcon;
    shell.add(jobs, 'left', { rank: 600 });
    shell.add(storage, 'left', { rank: 601 });
    shell.add(images, 'left', { rank: 602 });

    app.commands.addCommand(CommandIDs.openJobs, { label: 'TiHub: Jobs', execute: () => shell.activateById(jobs.id) });
    app.commands.addCommand(CommandIDs.openStorage, { label: 'TiHub: Storage', execute: () => shell.activateById(storage.id) });
    app.commands.addCommand(CommandIDs.openImages, { label: 'TiHub: Images', execute: () => shell.activateById(images.id) });
    app.commands.addCommand(CommandIDs.newJob, {
      label: 'TiHub: New training job',
      execute: args => {
        shell.activateById(jobs.id);
        jobs.openForm((args.image as string) || undefined);
      }
    });
    if (palette) {
      for (const command of [CommandIDs.openJobs, CommandIDs.openStorage, CommandIDs.openImages, CommandIDs.newJob]) {
        palette.addItem({ command, category: 'TiHub' });
      }
    }
  }
};

export default plugin;
