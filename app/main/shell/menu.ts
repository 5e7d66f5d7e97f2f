// The application menu: the standard roles plus a View menu per app page.
import { Menu, shell, type BrowserWindow, type MenuItemConstructorOptions } from "electron";

export function installMenu(getWindow: () => BrowserWindow | null): void {
  const isMac = process.platform === "darwin";
  const template: MenuItemConstructorOptions[] = [
    ...(isMac ? [{ role: "appMenu" } as MenuItemConstructorOptions] : []),
    { role: "fileMenu" },
    { role: "editMenu" },
    {
      label: "View",
      submenu: [
        { role: "reload" },
        { role: "toggleDevTools" },
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
        { label: "Guild on the web", click: () => void shell.openExternal("https://github.com/") },
        { label: "Focus the window", click: () => getWindow()?.focus() },
      ],
    },
  ];
  Menu.setApplicationMenu(Menu.buildFromTemplate(template));
}
