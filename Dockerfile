# A logbroker node. `docker compose up` (docker-compose.yml) runs three of them as a cluster.
FROM python:3.11-slim

ENV PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /src
COPY pyproject.toml README.md ./
COPY segments ./segments
COPY replication ./replication
COPY logbroker ./logbroker
COPY api ./api
COPY connectors ./connectors
RUN pip install . && mkdir -p /data

WORKDIR /data
VOLUME ["/data"]
# AMQP, HTTP, cluster link
EXPOSE 5672 15672 25672
ENTRYPOINT ["python", "-m", "logbroker", "serve"]
CMD ["--data-dir", "/data", "--host", "0.0.0.0"]
