# GPU image: vLLM generation, bge-large embeddings and the trainers on one CUDA machine.
# Build: docker build -t dpprefsyn .   Run: docker run --gpus all -v $PWD/runs:/app/runs dpprefsyn
FROM nvidia/cuda:12.8.1-runtime-ubuntu22.04

ENV DEBIAN_FRONTEND=noninteractive PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1
RUN apt-get update \
    && apt-get install -y --no-install-recommends python3.11 python3.11-venv python3-pip git \
    && rm -rf /var/lib/apt/lists/* \
    && python3.11 -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH

WORKDIR /app
COPY pyproject.toml README.md ./
COPY dpprefsyn ./dpprefsyn
COPY pipelines ./pipelines
COPY data ./data
# The gpu extra brings vLLM, which pins its own CUDA build of torch; on GPU machines that is
# the torch we want (the CPU wheel is only for CPU installs).
RUN pip install -e ".[gpu,train]"

ENTRYPOINT ["python", "-m", "pipelines.run"]
CMD ["--config", "pipelines/configs/demo.yaml"]
