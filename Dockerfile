# golive in a container: the wheel is built in one stage and installed, alone, into a slim
# runtime that runs as a non-root user.
#   docker build -t golive:0.1.0 .
#   docker run --rm golive:0.1.0 --version
#   mkdir -p out && docker run --rm --user "$(id -u):$(id -g)" -e MY_KEY -v "$PWD/out:/work" \
#       golive:0.1.0 smoke --target http://vllm.internal:8000 --api-key-env MY_KEY \
#       --out /work/bundle-smoke
# golive runs as uid 10001, which cannot write a folder of yours mounted on /work: --user
# runs it as you (the bundle is then yours), or give the folder to 10001 (chown 10001 out).
# The Kubernetes client is installed (golive[k8s]): `golive run --k8s-namespace` reads the
# engine pods, their logs and nodes from inside the cluster (docs/examples/k8s-job.yaml).
# The stdlib container probe is also at /opt/golive/container_probe.py, to pipe into the
# serving container without installing golive there:
#   docker run --rm --entrypoint cat golive:0.1.0 /opt/golive/container_probe.py \
#       | docker exec -i VLLM_CONTAINER python3 - > ctr.json
# The base is pinned to a patch release; pin its digest too (python:3.11.11-slim-bookworm@
# sha256:...) where your registry policy asks for it.
ARG PYTHON_IMAGE=python:3.11.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS wheel
WORKDIR /src
COPY pyproject.toml README.md ./
COPY src ./src
RUN python -m pip install --no-cache-dir "build>=1.2" \
    && python -m build --wheel --outdir /dist .

FROM ${PYTHON_IMAGE}
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_DISABLE_PIP_VERSION_CHECK=1
RUN groupadd --system --gid 10001 golive \
    && useradd --system --uid 10001 --gid golive --create-home --home-dir /home/golive golive \
    && mkdir /work && chown golive:golive /work
COPY --from=wheel /dist/ /tmp/dist/
RUN python -m pip install --no-cache-dir "$(echo /tmp/dist/golive-*.whl)[k8s]" \
    && rm -rf /tmp/dist
COPY src/golive/evidence/scripts/container_probe.py /opt/golive/container_probe.py
USER 10001:10001
WORKDIR /work
ENTRYPOINT ["golive"]
CMD ["--help"]
