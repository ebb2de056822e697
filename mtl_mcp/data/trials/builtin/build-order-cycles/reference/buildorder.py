"""The order in which to build the monorepo's packages."""


class CycleError(ValueError):
    """The dependencies loop back on themselves."""


def build_order(deps: dict[str, list[str]]) -> list[str]:
    """Every package exactly once, each one after all of its dependencies.

    `deps` maps a package to the packages it needs; a package named only as a dependency is
    included too. Dependencies that loop back on themselves raise CycleError.
    """
    order = []
    done = set()
    in_progress = []  # the path from the package being visited down to here

    def visit(package):
        if package in done:
            return
        if package in in_progress:
            cycle = in_progress[in_progress.index(package) :] + [package]
            raise CycleError(" -> ".join(cycle))
        in_progress.append(package)
        for dep in deps.get(package, []):
            visit(dep)
        in_progress.pop()
        done.add(package)
        order.append(package)

    for package in sorted(deps):
        visit(package)
    return order
