"""The dashboard: a front door for people, in a browser (`mtl-mcp ui`).

Like the CLI and the MCP server, it calls `Memory` and translates; it holds no memory of its
own when the warm service runs (it runs inside it: `mtl_mcp.dashboard.run`).

guard   who may talk to it: loopback Host, a one-time launch code traded for a session
        secret the page sends in a header (no cookie), its own Origin; the security headers
api     the routes: the page, a JSON API over `Memory`, the live feed (Server-Sent Events)
actions what the insight page's buttons do (edit, rate, retire, forget, share...)
views   what the page is shown, shaped and redacted (the map's points and figures too)
trials  the Trials page's data: the trials, one trial's report and the notes it names
run     where it runs: in the service, or in this process
static  the page itself: plain HTML, CSS and JavaScript, no build step, nothing fetched
        from anywhere else
"""
