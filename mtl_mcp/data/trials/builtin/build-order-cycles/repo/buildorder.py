"""The order in which to build the monorepo's packages."""


class CycleError(ValueError):
    """The dependencies loop back on themselves."""


def build_order(deps: dict[str, list[str]]) -> list[str]:
    """Every package exactly once, each one after all of its dependencies.

    `deps` maps a package to the packages it needs; a package named only as a dependency is
    included too. Dependencies that loop back on themselves raise CycleError.
    """
    order = []
    visited = set()

    def visit(package):
        if package in visited:
            return
        visited.add(package)
        for dep in deps.get(package, []):
            visit(dep)
        order.append(package)

    for package in sorted(deps):
        visit(package)
    return order
