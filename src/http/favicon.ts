// The page's icon: a 2 × 2 shard grid in the page's status colours (Active, Recovery, Assigned,
// Error). Served at /favicon.ico too, where browsers ask when a page names none: without it every
// page load logged a 404. SVG in a string, so the build copies no extra file.
export const FAVICON_SVG = `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 32 32">
<rect width="32" height="32" rx="6" fill="#0f1419"/>
<rect x="4" y="4" width="11" height="11" rx="2" fill="#2e9e5b"/>
<rect x="17" y="4" width="11" height="11" rx="2" fill="#2e9e5b"/>
<rect x="4" y="17" width="11" height="11" rx="2" fill="#3a7bd5"/>
<rect x="17" y="17" width="11" height="11" rx="2" fill="#c9a227"/>
</svg>
`;

export const FAVICON_TYPE = 'image/svg+xml';
