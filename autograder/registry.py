"""The task registry: the one list of the course's tasks.

Docs, the test markers, the CLI, the release tool and the grader all read this list;
nothing else in the repository enumerates tasks. A task's solution lives in the regions
``# BEGIN SOLUTION <id>`` ... ``# END SOLUTION`` of the files it names, and its tests
carry the pytest marker ``task<stage>_<n>`` (``0.4`` -> ``task0_4``).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Task:
    """One graded unit of work."""

    id: str
    """Dotted id, ``"<stage>.<n>"``."""
    title: str
    points: int
    files: tuple[str, ...]
    """Repository-relative files that hold the task's solution regions."""
    functions: tuple[str, ...]
    """Qualified names (``module:Class.method``) the student writes."""
    optional: bool = False
    """Graded, but the framework works without it (it falls back to given code), so
    scripts and the main job do not wait for it."""

    @property
    def stage(self) -> int:
        """The stage (``moduleN``) the task belongs to."""
        return int(self.id.split(".")[0])

    @property
    def marker(self) -> str:
        """The pytest marker that selects the task's tests."""
        return "task" + self.id.replace(".", "_")


TASKS: tuple[Task, ...] = (
    Task(
        id="0.1",
        title="Operators",
        points=10,
        files=("module0/operators.py",),
        functions=(
            "module0.operators:mul",
            "module0.operators:id",
            "module0.operators:add",
            "module0.operators:neg",
            "module0.operators:lt",
            "module0.operators:eq",
            "module0.operators:max",
            "module0.operators:is_close",
            "module0.operators:sigmoid",
            "module0.operators:relu",
            "module0.operators:log",
            "module0.operators:exp",
            "module0.operators:inv",
            "module0.operators:log_back",
            "module0.operators:inv_back",
            "module0.operators:relu_back",
        ),
    ),
    Task(
        id="0.2",
        title="Higher-order functions",
        points=10,
        files=("module0/operators.py",),
        functions=(
            "module0.operators:map",
            "module0.operators:zipWith",
            "module0.operators:reduce",
            "module0.operators:negList",
            "module0.operators:addLists",
            "module0.operators:sum",
            "module0.operators:prod",
        ),
    ),
    Task(
        id="0.3",
        title="Module and Parameter tree",
        points=10,
        files=("module0/module.py",),
        functions=(
            "module0.module:Module.modules",
            "module0.module:Module.train",
            "module0.module:Module.eval",
            "module0.module:Module.named_parameters",
            "module0.module:Module.parameters",
        ),
    ),
    Task(
        id="0.4",
        title="Central differences and Scalar forward",
        points=15,
        files=("module0/autodiff.py", "module0/scalar.py"),
        functions=(
            "module0.autodiff:central_difference",
            "module0.scalar:Add.forward",
            "module0.scalar:Log.forward",
            "module0.scalar:Mul.forward",
            "module0.scalar:Inv.forward",
            "module0.scalar:Neg.forward",
            "module0.scalar:Sigmoid.forward",
            "module0.scalar:ReLU.forward",
            "module0.scalar:Tanh.forward",
            "module0.scalar:Exp.forward",
            "module0.scalar:Pow.forward",
            "module0.scalar:LT.forward",
            "module0.scalar:EQ.forward",
        ),
    ),
    Task(
        id="0.5",
        title="Autodiff engine and Scalar backward",
        points=20,
        files=("module0/autodiff.py", "module0/scalar.py"),
        functions=(
            "module0.autodiff:Variable.chain_rule",
            "module0.autodiff:topological_sort",
            "module0.autodiff:backpropagate",
            "module0.scalar:Add.backward",
            "module0.scalar:Log.backward",
            "module0.scalar:Mul.backward",
            "module0.scalar:Inv.backward",
            "module0.scalar:Neg.backward",
            "module0.scalar:Sigmoid.backward",
            "module0.scalar:ReLU.backward",
            "module0.scalar:Tanh.backward",
            "module0.scalar:Exp.backward",
            "module0.scalar:Pow.backward",
            "module0.scalar:LT.backward",
            "module0.scalar:EQ.backward",
        ),
    ),
    Task(
        id="0.6",
        title="Optimizers and training a scalar network",
        points=15,
        files=("module0/optim.py", "module0/scalar_nn.py"),
        functions=(
            "module0.optim:SGD.step",
            "module0.optim:Adam.step",
            "module0.scalar_nn:ScalarLinear.forward",
        ),
    ),
    Task(
        id="1.1",
        title="TensorData: strides, indexing, views",
        points=10,
        files=("module1/tensor_data.py",),
        functions=(
            "module1.tensor_data:strides_from_shape",
            "module1.tensor_data:index_to_position",
            "module1.tensor_data:to_index",
            "module1.tensor_data:TensorData.is_contiguous",
            "module1.tensor_data:TensorData.indices",
            "module1.tensor_data:TensorData.permute",
        ),
    ),
    Task(
        id="1.2",
        title="Broadcasting",
        points=10,
        files=("module1/tensor_data.py",),
        functions=(
            "module1.tensor_data:shape_broadcast",
            "module1.tensor_data:broadcast_index",
        ),
    ),
    Task(
        id="1.3",
        title="Simple backend and tensor forward",
        points=20,
        files=("module1/tensor_ops.py", "module1/tensor_functions.py"),
        functions=(
            "module1.tensor_ops:tensor_map",
            "module1.tensor_ops:tensor_zip",
            "module1.tensor_ops:tensor_reduce",
            "module1.tensor_ops:tensor_matrix_multiply",
            "module1.tensor_functions:Neg.forward",
            "module1.tensor_functions:Inv.forward",
            "module1.tensor_functions:Sigmoid.forward",
            "module1.tensor_functions:ReLU.forward",
            "module1.tensor_functions:Tanh.forward",
            "module1.tensor_functions:Log.forward",
            "module1.tensor_functions:Exp.forward",
            "module1.tensor_functions:Pow.forward",
            "module1.tensor_functions:Add.forward",
            "module1.tensor_functions:Mul.forward",
            "module1.tensor_functions:LT.forward",
            "module1.tensor_functions:EQ.forward",
            "module1.tensor_functions:IsClose.forward",
            "module1.tensor_functions:Sum.forward",
            "module1.tensor_functions:Max.forward",
            "module1.tensor_functions:Permute.forward",
            "module1.tensor_functions:View.forward",
            "module1.tensor_functions:Copy.forward",
            "module1.tensor_functions:MatMul.forward",
        ),
    ),
    Task(
        id="1.4",
        title="Tensor backward and gradients through broadcasting",
        points=20,
        files=("module1/tensor_functions.py",),
        functions=(
            "module1.tensor_functions:Neg.backward",
            "module1.tensor_functions:Inv.backward",
            "module1.tensor_functions:Sigmoid.backward",
            "module1.tensor_functions:ReLU.backward",
            "module1.tensor_functions:Tanh.backward",
            "module1.tensor_functions:Log.backward",
            "module1.tensor_functions:Exp.backward",
            "module1.tensor_functions:Pow.backward",
            "module1.tensor_functions:Add.backward",
            "module1.tensor_functions:Mul.backward",
            "module1.tensor_functions:LT.backward",
            "module1.tensor_functions:EQ.backward",
            "module1.tensor_functions:IsClose.backward",
            "module1.tensor_functions:Sum.backward",
            "module1.tensor_functions:Max.backward",
            "module1.tensor_functions:Permute.backward",
            "module1.tensor_functions:View.backward",
            "module1.tensor_functions:Copy.backward",
            "module1.tensor_functions:MatMul.backward",
            "module1.tensor_functions:unbroadcast",
        ),
    ),
    Task(
        id="1.5",
        title="Tensor layers and training",
        points=10,
        files=("module1/tensor_nn.py",),
        functions=(
            "module1.tensor_nn:Linear.forward",
            "module1.tensor_nn:MLP.forward",
            "module1.tensor_nn:binary_cross_entropy_with_logits",
        ),
    ),
    Task(
        id="2.1",
        title="Parallel map, zip and reduce with Numba",
        points=15,
        files=("module2/fast_ops.py",),
        functions=(
            "module2.fast_ops:tensor_map_kernel",
            "module2.fast_ops:tensor_zip_kernel",
            "module2.fast_ops:tensor_reduce_kernel",
        ),
    ),
    Task(
        id="2.2",
        title="Parallel batched matrix multiply",
        points=15,
        files=("module2/fast_ops.py",),
        functions=("module2.fast_ops:tensor_matrix_multiply_kernel",),
    ),
    Task(
        id="2.3",
        title="High-performance matmul: packing and register tiling",
        points=10,
        optional=True,
        files=("module2/fast_matmul.py",),
        functions=("module2.fast_matmul:gemm",),
    ),
    Task(
        id="2.4",
        title="Training on the fast backend",
        points=10,
        files=("module2/fast_optim.py",),
        functions=("module2.fast_optim:adam_update", "module2.fast_optim:sgd_update"),
    ),
    Task(
        id="3.1",
        title="CUDA map and zip",
        points=10,
        files=("module3/cuda_ops.py",),
        functions=("module3.cuda_ops:tensor_map", "module3.cuda_ops:tensor_zip"),
    ),
    Task(
        id="3.2",
        title="CUDA reduce with shared memory",
        points=10,
        files=("module3/cuda_ops.py",),
        functions=("module3.cuda_ops:sum_practice", "module3.cuda_ops:tensor_reduce"),
    ),
    Task(
        id="3.3",
        title="CUDA matmul with shared-memory tiles",
        points=15,
        files=("module3/cuda_ops.py",),
        functions=("module3.cuda_ops:tensor_matrix_multiply",),
    ),
    Task(
        id="3.4",
        title="Training on the CUDA backend",
        points=5,
        files=("module3/cuda_optim.py",),
        functions=("module3.cuda_optim:adam_kernel", "module3.cuda_optim:sgd_kernel"),
    ),
    Task(
        id="4.1",
        title="Conv1d forward and backward",
        points=10,
        files=("module4/fast_conv.py",),
        functions=(
            "module4.fast_conv:conv1d_forward",
            "module4.fast_conv:conv1d_backward_input",
            "module4.fast_conv:conv1d_backward_weight",
        ),
    ),
    Task(
        id="4.2",
        title="Conv2d forward and backward",
        points=15,
        files=("module4/fast_conv.py",),
        functions=(
            "module4.fast_conv:conv2d_forward",
            "module4.fast_conv:conv2d_backward_input",
            "module4.fast_conv:conv2d_backward_weight",
        ),
    ),
    Task(
        id="4.3",
        title="Pooling, max and argmax",
        points=10,
        files=("module4/nn.py",),
        functions=(
            "module4.nn:tile",
            "module4.nn:avgpool2d",
            "module4.nn:maxpool2d_forward",
            "module4.nn:maxpool2d_backward",
            "module4.nn:Max.forward",
            "module4.nn:Max.backward",
            "module4.nn:argmax",
        ),
    ),
    Task(
        id="4.4",
        title="Softmax, dropout, losses and layers",
        points=15,
        files=("module4/nn.py", "module4/losses.py", "module4/layers.py"),
        functions=(
            "module4.nn:softmax",
            "module4.nn:logsoftmax",
            "module4.nn:dropout",
            "module4.losses:nll_loss",
            "module4.losses:cross_entropy",
            "module4.losses:binary_cross_entropy",
            "module4.losses:mse_loss",
            "module4.layers:he_normal",
            "module4.layers:xavier_uniform",
            "module4.layers:Conv1d.forward",
            "module4.layers:Conv2d.forward",
            "module4.layers:Flatten.forward",
            "module4.layers:Sequential.forward",
            "module4.layers:state_dict",
            "module4.layers:load_state_dict",
        ),
    ),
    Task(
        id="4.5",
        title="Training CNNs",
        points=10,
        files=("module4/models.py",),
        functions=("module4.models:DigitCNN.forward", "module4.models:SentenceCNN.forward"),
    ),
)


def get_task(task_id: str) -> Task:
    """Return the task with this id, or raise KeyError listing the known ids."""
    for task in TASKS:
        if task.id == task_id:
            return task
    known = ", ".join(t.id for t in TASKS)
    raise KeyError(f"unknown task {task_id!r}; the registry has: {known}")


def tasks_for_stage(stage: int) -> tuple[Task, ...]:
    """The tasks of one stage, in registry order."""
    return tuple(t for t in TASKS if t.stage == stage)
