// The status page's icon, served at /favicon.svg (and /favicon.ico, where browsers ask when a
// page names none) unless another module serves one: a small heat-map in the page's colours.
// SVG in a string, so the build copies no extra file.
export const PAGE_ICON_SVG = `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 32 32">
<rect width="32" height="32" rx="6" fill="#171d24"/>
<rect x="5" y="5" width="10" height="10" rx="1.5" fill="#3fb950"/>
<rect x="17" y="5" width="10" height="10" rx="1.5" fill="#3fb950"/>
<rect x="5" y="17" width="10" height="10" rx="1.5" fill="#58a6ff"/>
<rect x="17" y="17" width="10" height="10" rx="1.5" fill="#e3b341"/>
</svg>
`;
