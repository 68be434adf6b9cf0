"""The kernel layer of the guest lab: sources, Kconfig fragments, cached builds and their cache directories,
the series check, and the errno table a build's KUnit file holds. Nothing here boots a guest."""
