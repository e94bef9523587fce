# dreamkeeper — one image for the operator, the dream-cycle Job and the init container:
#   operator:       dreamkeeper operator ...      cycle Job / init container: dreamkeeper dream ... / dreamkeeper ...
#
# Base image (build arg BASE_IMAGE): any Debian-family image with python3 >= 3.11 and its venv module,
# used by every stage so the venv's interpreter symlink resolves in the final stage.
#   - Default, no registry needed: localhost/python-base:3.11-bookworm, made with debootstrap by
#     tests/tools/build-base-image.sh (tests/tools/build-image.sh calls it).
#   - Upstream:  docker build --build-arg BASE_IMAGE=python:3.12-slim -t dreamkeeper .
#
# Python dependencies come from PyPI, or fully offline from a wheelhouse in the build context at
# .wheelhouse/ (wheels for the runtime dependencies and for the build backend). tests/tools/build-image.sh
# stages one with `pip download` on the host and builds with --network none, because pip inside a build
# container cannot verify TLS on the test machines; a plain `docker build .` from the repo has no
# .wheelhouse/ and uses PyPI.
#
# Runtime contract: numeric non-root USER (65532), no compilers, nothing written outside /tmp and mounted
# volumes (bytecode is compiled at build time, PYTHONDONTWRITEBYTECODE=1, HOME=/tmp), so it runs with
# readOnlyRootFilesystem: true plus an emptyDir (or tmpfs) at /tmp.
ARG BASE_IMAGE=localhost/python-base:3.11-bookworm

# Stage 1: the dependencies, in their own venv and layers, so a source edit reuses them (and the final
# image's big layer) unchanged. pip lives in a separate tools venv and drives the app venv with --python,
# so the app venv never contains pip or setuptools.
FROM ${BASE_IMAGE} AS deps
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    PYTHONDONTWRITEBYTECODE=1
RUN python3 -m venv /opt/pip && python3 -m venv --without-pip /opt/dreamkeeper
# The bracket glob makes the wheelhouse optional: when .wheelhouse/ exists its wheels are copied next to
# pyproject.toml, otherwise only pyproject.toml is (buildah rejects a COPY whose only source is an empty glob).
COPY pyproject.toml .wheelhous[e] /build/
RUN set -eu; \
    if ls /build/*.whl >/dev/null 2>&1; then export PIP_NO_INDEX=1 PIP_FIND_LINKS=/build; fi; \
    python3 -c 'import tomllib; d = tomllib.load(open("/build/pyproject.toml", "rb")); \
      open("/build/requirements.txt", "w").write("\n".join(d["project"]["dependencies"])); \
      open("/build/build-requirements.txt", "w").write("\n".join(d["build-system"]["requires"]))'; \
    /opt/pip/bin/pip install --no-compile -r /build/build-requirements.txt; \
    /opt/pip/bin/pip --python /opt/dreamkeeper/bin/python install --no-compile -r /build/requirements.txt; \
    # numpy ships its own test suite (~15 MB); nothing imports it at run time.
    find /opt/dreamkeeper/lib -path '*/site-packages/numpy/*' -type d -name tests -prune -exec rm -rf {} +; \
    # Compile once here: the root filesystem is read-only at run time. unchecked-hash keeps the .pyc valid
    # whatever mtimes the COPY into the final stage produces.
    /opt/dreamkeeper/bin/python -m compileall -q -j 0 --invalidation-mode unchecked-hash /opt/dreamkeeper/lib

# Stage 2: the project itself, staged under /out (pip --root, like DESTDIR) so the final stage copies only it.
FROM deps AS project
COPY pyproject.toml README.m[d] /src/
COPY operator/ /src/operator/
RUN set -eu; \
    if ls /build/*.whl >/dev/null 2>&1; then export PIP_NO_INDEX=1 PIP_FIND_LINKS=/build; fi; \
    # The build backend is already in the tools venv: no isolated build env to set up on every source edit.
    /opt/pip/bin/pip wheel --no-deps --no-build-isolation --wheel-dir /wheel /src; \
    /opt/pip/bin/pip --python /opt/dreamkeeper/bin/python install --no-compile --no-deps --root /out /wheel/*.whl; \
    /opt/dreamkeeper/bin/python -m compileall -q -j 0 --invalidation-mode unchecked-hash -s /out -p / /out; \
    # Installed for real in this throwaway stage too, to check the dependency set is complete.
    cp -a /out/. /; \
    /opt/pip/bin/pip --python /opt/dreamkeeper/bin/python check

FROM ${BASE_IMAGE}
ARG DREAMKEEPER_UID=65532
LABEL org.opencontainers.image.title="dreamkeeper" \
      org.opencontainers.image.description="Kubernetes operator that runs dream consolidation of AI agents' long-term memory without ever losing a memory" \
      org.opencontainers.image.licenses="Apache-2.0"
# A passwd entry, so tools that look the user up by uid (getpass, ssh-less git, id) work.
RUN groupadd --system --gid "${DREAMKEEPER_UID}" dreamkeeper \
 && useradd --system --uid "${DREAMKEEPER_UID}" --gid "${DREAMKEEPER_UID}" --no-create-home \
      --home-dir /tmp --shell /usr/sbin/nologin dreamkeeper
COPY --from=deps /opt/dreamkeeper /opt/dreamkeeper
COPY --from=project /out/ /
ENV PATH=/opt/dreamkeeper/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    VIRTUAL_ENV=/opt/dreamkeeper \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    HOME=/tmp \
    TMPDIR=/tmp
WORKDIR /tmp
# Numeric, so Kubernetes can verify runAsNonRoot without a passwd lookup.
USER ${DREAMKEEPER_UID}:${DREAMKEEPER_UID}
ENTRYPOINT ["dreamkeeper"]
CMD ["--help"]
