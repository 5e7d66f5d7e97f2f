// The application menu: the standard roles, a View menu (DevTools only in
// development), and Help pointing at the app's own help page (guild://app/#/help:
// getting started, keyboard shortcuts), which works offline.
import { app, Menu, type BrowserWindow, type MenuItemConstructorOptions } from "electron";

import { devToolsAllowed, helpUrl } from "./policy.js";

export function installMenu(getWindow: () => BrowserWindow | null): void {
  const isMac = process.platform === "darwin";
  const showHelp = () => {
    const win = getWindow();
    if (!win) return;
    void win.loadURL(helpUrl);
    win.focus();
  };
  const template: MenuItemConstructorOptions[] = [
    ...(isMac ? [{ role: "appMenu" } as MenuItemConstructorOptions] : []),
    { role: "fileMenu" },
    { role: "editMenu" },
    {
      label: "View",
      submenu: [
        { role: "reload" },
        ...(devToolsAllowed(app.isPackaged) ? [{ role: "toggleDevTools" } as MenuItemConstructorOptions] : []),
        { type: "separator" },
        { role: "resetZoom" },
        { role: "zoomIn" },
        { role: "zoomOut" },
        { type: "separator" },
        { role: "togglefullscreen" },
      ],
    },
    { role: "windowMenu" },
    {
      role: "help",
      submenu: [
        { label: "Guild Help", accelerator: "F1", click: showHelp },
        { label: "Keyboard Shortcuts", click: showHelp },
      ],
    },
  ];
  Menu.setApplicationMenu(Menu.buildFromTemplate(template));
}
