#!/usr/bin/env python3
"""The components' dependency rule (docs/architecture.md), checked on the sources.

Each component has its public headers in include/xtel/<component>/ and its code in
src/<component>/. A file of a component may include its own headers and those of the components
below it, never one above:

    core < metrics < http, node < push, exporters < registry < agent; core < trace < node,
    push, exporters, registry, agent;
    plugin (the plug-in API) < exporters; core, metrics, trace, exporters, node < nixl (NIXL's
    plug-in and the reader of NIXL's own files)

(http serves metrics: negotiation and the /metrics body; metrics names no transport; node
knows no http; push sits beside exporters; the registry, which makes pipelines, names no
transport either: only the agent, above it, is UCX's). The plug-in API
(include/xtel/plugin/) may include core only. Tools (tools/) are users of the library: they
include public headers only (xtel/...), never a private header of src/, and name nothing in a
detail namespace; so do the Python package's bindings (python/src/). UCX's headers (<ucp/...>,
<ucs/...>, <uct/...>, <ucm/...>) are included by the agent component alone, the one that links
UCX, and by no tool or binding: tests/link_test.py checks the link side. Prints each violation on
a line and exits 1, or prints a summary and exits 0.
Argument: the source directory.
"""
import os
import re
import sys

ALLOWED = {
    'core': set(),
    'metrics': {'core'},
    'http': {'core', 'metrics'},
    'node': {'core', 'metrics', 'trace'},
    'trace': {'core'},
    'push': {'core', 'metrics', 'http', 'trace'},
    'exporters': {'core', 'metrics', 'http', 'node', 'trace', 'plugin'},
    'registry': {'core', 'metrics', 'http', 'node', 'trace', 'exporters', 'plugin'},
    'agent': {'core', 'metrics', 'http', 'node', 'trace', 'exporters', 'plugin', 'registry'},
    'plugin': {'core'},
    'nixl': {'core', 'metrics', 'trace', 'exporters', 'node'},
}
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
UCX_INCLUDE = re.compile(r'^\s*#\s*include\s+<(uc[pstm]/[^>]+)>', re.M)
UCX_COMPONENT = 'agent'
DETAIL = re.compile(r'\bdetail::')


def component_of(include):
    """The component an include names ("xtel/node/file.hpp", "node/file_io.hpp"), or None."""
    parts = include.split('/')
    if parts[0] == 'xtel' and len(parts) > 2:
        return parts[1]
    if parts[0] in ALLOWED and len(parts) > 1:
        return parts[0]
    return None


def sources(root, top):
    for base, _, names in os.walk(os.path.join(root, top)):
        for n in sorted(names):
            if n.endswith(('.hpp', '.cpp', '.h')):
                yield os.path.join(base, n)


def ucx_includes(rel, who, text):
    """A finding for each UCX header `text` includes, which only the agent component may."""
    return [f'{rel}: {who} includes <{inc}> of UCX, which only the {UCX_COMPONENT} component '
            f'may (it alone links UCX)' for inc in UCX_INCLUDE.findall(text)]


def main(root):
    problems = []
    checked = 0
    for top in ('include/xtel', 'src'):
        for path in sources(root, top):
            rel = os.path.relpath(path, root)
            parts = os.path.relpath(path, os.path.join(root, top)).split(os.sep)
            if len(parts) < 2 or parts[0] not in ALLOWED:
                problems.append(f'{rel}: not in a component folder ({", ".join(ALLOWED)})')
                continue
            own = parts[0]
            text = open(path, encoding='utf-8', errors='replace').read()
            checked += 1
            if own != UCX_COMPONENT:
                problems += ucx_includes(rel, own, text)
            for inc in INCLUDE.findall(text):
                other = component_of(inc)
                if other is None or other == own:
                    if top == 'include/xtel' and not inc.startswith('xtel/'):
                        problems.append(f'{rel}: a public header includes the private "{inc}"')
                    continue
                if other not in ALLOWED[own]:
                    problems.append(f'{rel}: {own} includes "{inc}" of {other}, which is not '
                                    f'below it')
                elif top == 'include/xtel' and not inc.startswith('xtel/'):
                    problems.append(f'{rel}: a public header includes the private "{inc}"')
    # The Python package's bindings (python/src/) are users as the tools are.
    for path in [*sources(root, 'tools'), *sources(root, os.path.join('python', 'src'))]:
        rel = os.path.relpath(path, root)
        text = open(path, encoding='utf-8', errors='replace').read()
        checked += 1
        problems += ucx_includes(rel, 'a tool', text)
        for inc in INCLUDE.findall(text):
            if component_of(inc) is not None and not inc.startswith('xtel/'):
                problems.append(f'{rel}: a tool includes the private header "{inc}" of src/')
        for n, line in enumerate(text.split('\n'), 1):
            if DETAIL.search(line.split('//')[0]):
                problems.append(f'{rel}:{n}: a tool names detail:: ({line.strip()})')
    for p in problems:
        print(p)
    if problems:
        print(f'{len(problems)} violations of the components\' rule in {checked} files')
        return 1
    print(f'{checked} files: every include goes down the components, tools use public headers')
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1]))
