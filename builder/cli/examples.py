"""One worked example per command, shown at the end of its ``--help``.

Kept in one table (rather than spread over the command modules) so that a unit test
can check that every command has one and that each example names a real command.
"""

from __future__ import annotations

from collections.abc import Iterator

import typer

# Command path (as typed after `builder`) -> example lines.
EXAMPLES: dict[str, list[str]] = {
    "demo": ["builder demo --workdir ./builder-demo",
             "builder -c ./builder-demo/builder.toml index list"],
    "config": ["builder config", "builder -c builder.toml config --json"],
    "render": ["builder render python", "builder render --out rendered/"],
    "images": ["builder images", "builder images --dry-run", "builder --no-host-ca images --stage base"],
    "nightly": ["builder nightly --keep 7 --report-dir nightly-report",
                "builder nightly --pkg torchvision --repo torchvision=file:///src/vision"],
    "lock": ["builder lock --xla master -o builder.lock"],
    "verify": ["builder verify --all", "builder verify torch-2.9.0a0+git1234567-cp311-cp311-manylinux_2_24_x86_64.whl"],
    "wheels": ["builder wheels --xla master   (torch at the commit xla's .torch_commit pins)",
               "builder wheels --torch main --dry-run --json   (the plan: keys, reuse or build)",
               "builder wheels --xla main --torch 2.9.0   (prebuilt torch from PyPI)",
               "builder wheels --torch 2.13.0 --pkg torchvision=main   (any recipe, or a [packages.NAME] table)"],
    "push": ["builder push --to http://localhost:8080/ --user ci dist/*.whl"],
    "xla-check": ["builder xla-check train.py --epochs 1", "builder xla-check --strict --json train.py"],
    "cache stats": ["builder cache stats", "builder cache stats --json"],
    "cache path": ["builder cache path"],
    "cache clear": ["builder cache clear"],
    "base bootstrap": ["builder base bootstrap"],
    "ci render": ["builder ci render github > .github/workflows/nightly.yml"],
    "index add": ["builder index add dist/*.whl", "builder index add --no-deps my_ext-1.0-py3-none-any.whl"],
    "index list": ["builder index list", "builder index list --json"],
    "index show": ["builder index show torch-2.9.0a0+git1234567-cp311-cp311-manylinux_2_24_x86_64.whl"],
    "index prune": ["builder index prune --keep 7"],
    "index check": ["builder index check", "builder index check --repair"],
    "index serve": ["builder index serve --port 8080",
                    "builder index serve --host 0.0.0.0 --auth htpasswd   (then: twine upload "
                    "--repository-url http://HOST:8080/ dist/*)"],
    "index fetch": ["builder index fetch torch==2.9.0 torch_xla==2.9.0"],
    "profile": ["builder profile torch", "builder profile torch --diff torch-2.99.0a0+git1234567-cp311-cp311-"
                "manylinux_2_24_x86_64.whl", "builder profile torch --json"],
    "dist up": ["builder dist up --servers 2   (then: builder wheels --torch main --dist URL-it-printed)",
                "builder dist up --servers 2 --cpus-per-server 1"],
    "dist down": ["builder dist down"],
    "dist status": ["builder dist status"],
}


def epilog(lines: list[str]) -> str:
    # Typer's rich help joins epilog lines into a paragraph unless they are separate
    # paragraphs; one per line keeps each example copyable.
    return "Examples:\n\n" + "\n\n".join(f"  {line}" for line in lines)


def walk(app: typer.Typer, prefix: str = "") -> Iterator[tuple[str, typer.models.CommandInfo]]:
    """Every leaf command of ``app`` with its path ("index serve")."""
    for info in app.registered_commands:
        name = info.name or (info.callback.__name__.replace("_", "-") if info.callback else "")
        yield (prefix + name).strip(), info
    for group in app.registered_groups:
        if group.typer_instance is not None:
            yield from walk(group.typer_instance, f"{prefix}{group.name} ")


def attach(app: typer.Typer) -> list[str]:
    """Set each command's epilog from EXAMPLES; return the paths that have none."""
    missing = []
    for path, info in walk(app):
        if path in EXAMPLES:
            info.epilog = epilog(EXAMPLES[path])
        else:
            missing.append(path)
    return missing
