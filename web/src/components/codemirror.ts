// CodeMirror's look in the dark colour scheme, shared by the editor and the diff view (both
// loaded lazily, so this is too).
import { EditorView } from '@codemirror/view';

export const darkTheme = EditorView.theme({ '&': { backgroundColor: '#1a1b1e', color: '#c1c2c5' }, '.cm-gutters': { backgroundColor: '#25262b', color: '#909296', border: 'none' }, '.cm-activeLine': { backgroundColor: '#2c2e33' }, '.cm-activeLineGutter': { backgroundColor: '#2c2e33' }, '.cm-cursor': { borderLeftColor: '#fff' } }, { dark: true });
