"""Generated from the reference by ``python -m autograder.own_work``: do not edit.

The handout's given code that the reference's walk of each own-work task reaches
(:mod:`autograder.own_work`): what the student's local test (``tests/own_work.py``)
trusts, as the grader does from the reference itself. :data:`KEYS` names each node
(file, what it binds, a digest of its source); :data:`GIVEN` gives, per task, the
indices of those the task's functions reach and of those only import-time code
reaches. ``tests/autograder/test_own_work.py`` keeps it equal to the reference's.
"""

from __future__ import annotations

KEYS: tuple[str, ...] = (
    "module0/__init__.py:<module>:23309ed28dc72b8cd9dc",
    "module0/__init__.py:operators:04d71ce0b25c14401fd8",
    "module0/operators.py:<module>:71090d6b455fbe5adde8",
    "module0/operators.py:is_close:5897fca5573bc5cecc34",
    "module1/__init__.py:<module>:019584f6c192df99dc72",
    "module1/__init__.py:<module>:9034b76e4a7b30eed834",
    "module1/tensor_ops.py:<module>:35a210edc6f5ffbdc2fd",
    "module1/tensor_ops.py:<module>:3a5abdd78c93df93839f",
    "module1/tensor_ops.py:<module>:632d3e52e07f6ab12172",
    "module1/tensor_ops.py:<module>:ff0e921cf20fb18d9147",
    "module1/tensor_ops.py:Protocol,TYPE_CHECKING:fd32cb3ae43a253261b6",
    "module1/tensor_ops.py:is_close_float:254f5b0a4184c825d378",
    "module1/tensor_ops.py:operators:e6405759280648ebb40c",
    "module2/__init__.py:<module>:06dbca4a6661d6c01d1a",
    "module2/__init__.py:<module>:45f41f2342b8111ca919",
    "module2/__init__.py:<module>:5b81bfd8d3c48f1e1bb4",
    "module2/__init__.py:<module>:9265c1b1691349d6f191",
    "module2/__init__.py:<module>:abf5d9e310571f424bb1",
    "module2/__init__.py:<module>:e8dad474983f49415088",
    "module2/__init__.py:tuning:94485ed2314216086c10",
    "module2/cache.py:<module>:1c4034985c8984fc03db",
    "module2/cache.py:<module>:c1b123ae3f9a44dcd99d",
    "module2/cache.py:DependencyLocator.<body>:f7ac2befa7f49e6f41f9",
    "module2/cache.py:DependencyLocator.__init__:c9b0b001a86d9767da4e",
    "module2/cache.py:DependencyLocator.ensure_cache_path:cc9b84654275b9d77324",
    "module2/cache.py:DependencyLocator.from_function:441cda56d31e7a250403",
    "module2/cache.py:DependencyLocator.get_cache_path:a30dcb08cee4f65f05d3",
    "module2/cache.py:DependencyLocator.get_disambiguator:7950ebd54422569e6a0e",
    "module2/cache.py:DependencyLocator.get_source_stamp:cd6947d15b8bcd601116",
    "module2/cache.py:DependencyLocator:da9a54519835f72e0c9a",
    "module2/cache.py:Path:8339aa20c0414fcb9105",
    "module2/cache.py:WATCHED:d24c9b82cb941b07833e",
    "module2/cache.py:_ROOT:4fb51005ce4885d24a71",
    "module2/cache.py:_digest:36133f74fe153a9ae313",
    "module2/cache.py:_locator_classes:e1d67a2121e5bbd41e04",
    "module2/cache.py:caching:04b8e86dfefb15f34bc6",
    "module2/cache.py:hashlib:3d781e0f5dea6d5cf94e",
    "module2/cache.py:install:b64f03399a69d28f86e8",
    "module2/cache.py:os:967ab25d31533e78df3f",
    "module2/compiled_ops.py:<module>:03a1db77311d2798eb7c",
    "module2/compiled_ops.py:<module>:1b0961c1e550038fa80d",
    "module2/compiled_ops.py:<module>:43de94a2e61fdc04f89b",
    "module2/compiled_ops.py:BINARY_NAMES:89c5b41a7029d6aad391",
    "module2/compiled_ops.py:OP_ADD,OP_EQ,OP_INV_BACK,OP_IS_CLOSE,OP_LOG_BACK,OP_LT,OP_MAX,OP_MUL,OP_POW,OP_RELU_BACK:36a856e7fe075ef028f4",
    "module2/compiled_ops.py:OP_EXP,OP_ID,OP_INV,OP_LOG,OP_NEG,OP_RELU,OP_SIGMOID,OP_TANH:fe22e84417839fde4f8c",
    "module2/compiled_ops.py:PARALLEL_MIN:72d1fa04dd595a9ef79a",
    "module2/compiled_ops.py:UNARY_NAMES:9507ca6ca31935a1e0b8",
    "module2/compiled_ops.py:_add,_eq,_inv_back,_is_close,_log_back,_lt,_max,_mul,_power,_relu_back:7f419022ff46392c56a8",
    "module2/compiled_ops.py:_exp,_id,_inv,_log,_neg,_relu,_sigmoid,_tanh:f34ea6c8e781e9b76b3e",
    "module2/compiled_ops.py:_index:6526a9ece1185851a935",
    "module2/compiled_ops.py:_ops:c872f5457cbd411c7191",
    "module2/compiled_ops.py:binary:835dda5aeb07b56a4898",
    "module2/compiled_ops.py:broadcast_index:760ce913474a7a9c94f5",
    "module2/compiled_ops.py:cache:e66acc6669b6dcbe67a9",
    "module2/compiled_ops.py:index_to_position:c8e4a35f52d6bdd8e2af",
    "module2/compiled_ops.py:jit_functions:f933299ed087611aa0ad",
    "module2/compiled_ops.py:njit:27339604e0aabecae7d2",
    "module2/compiled_ops.py:operators:f4ddec8eea9ba29b8280",
    "module2/compiled_ops.py:size_of:a976110b4e564066a887",
    "module2/compiled_ops.py:tensor_data:9047268bf9512d70fc52",
    "module2/compiled_ops.py:to_index:87af71f540ae3b293613",
    "module2/compiled_ops.py:types:b43c102dd53c1d66e354",
    "module2/compiled_ops.py:unary:e660779b444b9dd10c34",
    "module2/fast_matmul.py:<module>:383847f50e9c7700d795",
    "module2/fast_matmul.py:<module>:3fa25da57b99678c4c3d",
    "module2/fast_matmul.py:<module>:9788fb4a1dca3a548f8e",
    "module2/fast_matmul.py:<module>:9aa430742c1591ee26a6",
    "module2/fast_matmul.py:<module>:e464bfb901648e5e3213",
    "module2/fast_matmul.py:Any,TYPE_CHECKING:3dadcf2fe4951ade9de3",
    "module2/fast_matmul.py:FASTMATH:309aa87d2da06973cb9f",
    "module2/fast_matmul.py:config,njit,prange:036494c102a340bf9123",
    "module2/fast_matmul.py:gemm:e01ed1f97a0087bc658d",
    "module2/fast_matmul.py:np:2d09954f2c07469b0cbd",
    "module2/fast_ops.py:<module>:2c020f57adfb3c708348",
    "module2/fast_ops.py:<module>:64399069740a07fc420a",
    "module2/fast_ops.py:<module>:b33296635d6c164d9fd5",
    "module2/fast_ops.py:<module>:b603aac30ff55bad8c31",
    "module2/fast_ops.py:<module>:ea8f0a64266b699e45d3",
    "module2/fast_ops.py:<module>:fe3694761a5183195488",
    "module2/fast_ops.py:Any,TYPE_CHECKING:dc1c114265d2cb300303",
    "module2/fast_ops.py:BINARY_OPS,PARALLEL_MIN,UNARY_OPS,binary,broadcast_index,index_to_position,size_of,to_index,unary:f08038053a4ef86935b0",
    "module2/fast_ops.py:cache,fast_index,threads:ade7656e3c97308316bf",
    "module2/fast_ops.py:compile_stage1:0793177103b40e66292e",
    "module2/fast_ops.py:njit,prange:a7ab485e0befe2314de2",
    "module2/fast_ops.py:np:bb1e324aaf20ef3be018",
    "module2/fast_ops.py:tensor_map_kernel:3e653541a9f79cc489cb",
    "module2/fast_ops.py:tensor_matrix_multiply_kernel:daae06ea9ac82bc3ab8c",
    "module2/fast_ops.py:tensor_reduce_kernel:0194c0b4791c3c593625",
    "module2/fast_ops.py:tensor_zip_kernel:90357370af2a1a07cd1f",
    "module2/fast_ops.py:types:68e1d8077decf856b16c",
    "module2/tuning.py:<module>:639a2d684c8b24c1773b",
    "module2/tuning.py:<module>:9e76f833ca62befc4918",
    "module2/tuning.py:M_MMAP_MAX:c60fad0447ef6cfee594",
    "module2/tuning.py:M_TRIM_THRESHOLD:9e8765faf35026ab6dba",
    "module2/tuning.py:compile_features:a3340119abbaf9383d27",
    "module2/tuning.py:ctypes:f5c60762d62bfc52cea2",
    "module2/tuning.py:keep_freed_memory:21be7f5e85aa1d452d27",
    "module2/tuning.py:llvm:33441c58299d3d2dcf5e",
    "module2/tuning.py:numba:bc536330220148778e21",
    "module2/tuning.py:optimise_at_level_2:3400ac1cf71d6fa83211",
    "module2/tuning.py:os:bfd7142c4f9ad310065e",
    "module2/tuning.py:prefer_full_width_vectors:1078eb4d071454b256f7",
    "module2/tuning.py:use_numba_setting:dec8dacab081f19292b4",
    "module2/tuning.py:vector_bytes:9b653971f004ef6faafa",
    "module2/tuning.py:vector_registers:3c69884b9224bc78ddbb",
    "module2/tuning.py:vectorize_straight_line_code:65b24039df2af4622d1f",
    "module3/__init__.py:<module>:0272026ed65792caa944",
    "module3/__init__.py:<module>:4f68006ca6baf27df23e",
    "module3/cuda_ops.py:<module>:1df52bcd2b2b3dcbce6f",
    "module3/cuda_ops.py:<module>:286ae848a10c27d52b4c",
    "module3/cuda_ops.py:<module>:40890ac4aadae39aba6d",
    "module3/cuda_ops.py:<module>:600000f0a6197c4dc9dc",
    "module3/cuda_ops.py:<module>:9116e0a3ade39214bf13",
    "module3/cuda_ops.py:<module>:ae1b6775547d92be7586",
    "module3/cuda_ops.py:<module>:e3619179fd32b10e3bcb",
    "module3/cuda_ops.py:<module>:f2678db3584d435f1cbc",
    "module3/cuda_ops.py:<module>:f2c3ddfbb55a4d7884eb",
    "module3/cuda_ops.py:<module>:f7f20538f909def6a0f3",
    "module3/cuda_ops.py:<module>:f9b6e9ccbd59e5a42bec",
    "module3/cuda_ops.py:BINARY_NAMES,UNARY_NAMES,jit_functions:4bbe4695a71874834667",
    "module3/cuda_ops.py:BLOCK_DIM:8613d17b90aa50e371a3",
    "module3/cuda_ops.py:DEVICE_FUNCTIONS:460f7c68980e2e8a9605",
    "module3/cuda_ops.py:DEVICE_FUNCTIONS:82e1a2720884806cf64e",
    "module3/cuda_ops.py:MAX_DIMS:669538b757ce0b3e5583",
    "module3/cuda_ops.py:MapProto,TensorBackend,TensorOps,is_close_float,matmul_shape,shape_broadcast:c6f1d715729ba27ee25f",
    "module3/cuda_ops.py:REDUCE_THREADS:7f62b125dcb1b3edcab6",
    "module3/cuda_ops.py:ROWS_PER_THREAD:6e717f9948708f530b2a",
    "module3/cuda_ops.py:TILE:157f9c95916689dc209c",
    "module3/cuda_ops.py:TILE_ROWS:5fdbac7c326e690142d2",
    "module3/cuda_ops.py:_device:8a826707fada85bff5e2",
    "module3/cuda_ops.py:_index:24a3b7373e757f7f636b",
    "module3/cuda_ops.py:_is_close:5a7b93ab6615ba026e9f",
    "module3/cuda_ops.py:_is_close_float:13579769de5ecd91b583",
    "module3/cuda_ops.py:_ops:db9369d3ee566742aa31",
    "module3/cuda_ops.py:_quiet_low_occupancy:95be8b3b9a1f0778ba27",
    "module3/cuda_ops.py:broadcast_index:699aec96fab987a759c3",
    "module3/cuda_ops.py:cuda,float64,int32:c6bb975c1c862a2d5c18",
    "module3/cuda_ops.py:device_function:f8cfdecc9493f1d22541",
    "module3/cuda_ops.py:importlib:e0e3b6d2d3e8836b0183",
    "module3/cuda_ops.py:index_to_position:43a1aaf40b508c8e489a",
    "module3/cuda_ops.py:operators:6c61bce717c83cd79827",
    "module3/cuda_ops.py:sum_practice:00f2c65ac911b615c428",
    "module3/cuda_ops.py:tensor_data:3f604dbc4ecb7fc78eac",
    "module3/cuda_ops.py:tensor_map:b30aca92aa60a15de6ed",
    "module3/cuda_ops.py:tensor_matrix_multiply:ba6522020e414360a6e3",
    "module3/cuda_ops.py:tensor_reduce:0538e944c12ee84ed7be",
    "module3/cuda_ops.py:tensor_zip:1fffbb997266ae221a57",
    "module3/cuda_ops.py:to_index:0153673b2a456190a2ed",
    "module3/cuda_optim.py:<module>:ba30f27e602105d0f530",
    "module3/cuda_optim.py:adam_kernel:73a25f08ffe6e5687854",
    "module3/cuda_optim.py:cuda:9721eeb3fd60a51e022d",
    "module3/cuda_optim.py:math:4e54c3c033c17dbb2372",
    "module3/cuda_optim.py:sgd_kernel:16548d8db159e3cc0ec3",
    "module4/__init__.py:<module>:8e1252dff553bb626150",
    "module4/__init__.py:<module>:e52c3f8f27d09fe13171",
    "module4/fast_conv.py:<module>:456ea23e57187b11f940",
    "module4/fast_conv.py:<module>:57b39cbe02c2ee922191",
    "module4/fast_conv.py:<module>:86a20f470802c418241f",
    "module4/fast_conv.py:Any,TYPE_CHECKING:8fdec05c17ab93e1252e",
    "module4/fast_conv.py:PARALLEL:06013e56e38ec19cf7fd",
    "module4/fast_conv.py:ParallelOptions:4c546b3ca050213f44a6",
    "module4/fast_conv.py:conv1d_backward_input:956906baff635d58af24",
    "module4/fast_conv.py:conv1d_backward_weight:3a2370c50cf424ee61ed",
    "module4/fast_conv.py:conv1d_forward:47417f0352d6a0167870",
    "module4/fast_conv.py:conv2d_backward_input:10767bd5250d3aa07a29",
    "module4/fast_conv.py:conv2d_backward_weight:df697b9557781e9e715b",
    "module4/fast_conv.py:conv2d_forward:8a3ef6ee362180dbf4f4",
    "module4/fast_conv.py:njit,prange:50011122550e8761384d",
    "module4/fast_conv.py:np:a466e44c9dff51c0bfaf",
    "module5/__init__.py:<module>:38ad5f3fcf672a98dfe0",
    "module5/__init__.py:<module>:dd00649f0f768840e62f",
    "module5/fused.py:<module>:0b8d96cf84adb7d8cb01",
    "module5/fused.py:<module>:4877cec23653d09d8526",
    "module5/fused.py:<module>:65c734f29dc855915a78",
    "module5/fused.py:<module>:65cf6cfd4eb6ffee7aa6",
    "module5/fused.py:<module>:6d001485e103cf2a0eb4",
    "module5/fused.py:<module>:8e327a853847fcf162e4",
    "module5/fused.py:<module>:f645ac0840011432723a",
    "module5/fused.py:<module>:f6968334cd1ad03bee61",
    "module5/fused.py:BLOCK_Q:aa5be3185d63a92aecc0",
    "module5/fused.py:CHUNK,SPAN:83e942d8a52f693d5377",
    "module5/fused.py:FASTMATH:e24a5b8eb974159beed9",
    "module5/fused.py:GELU_C:a32460a919da26243397",
    "module5/fused.py:ROWS_PER_TASK:5d64d05d1001b32bbaa2",
    "module5/fused.py:ROW_BLOCK:49e3052ccad8c30f5b64",
    "module5/fused.py:SERIAL_MAX:21562550e96d53cecf86",
    "module5/fused.py:causal_attention:367f8859d5566aaff796",
    "module5/fused.py:causal_attention_backward:1449fdba6a8f83884769",
    "module5/fused.py:gelu_backward:96222d1abe4f5a3752f9",
    "module5/fused.py:gelu_forward:862a2e2f78edd8a6dda7",
    "module5/fused.py:layer_norm_rows:824228b8a436234fcff6",
    "module5/fused.py:layer_norm_rows_backward:35938c265c3c1be16520",
    "module5/fused.py:math:731af1a7aa4d3000698d",
    "module5/fused.py:njit,prange:3e42a6d5929305cbca4a",
    "module5/fused.py:np:8cec1782270575419e26",
    "module5/fused.py:softmax_rows:ca6e8fd55db293d136b7",
    "module5/fused.py:softmax_rows_backward:66c8ab328521ce86d44c",
    "module6/__init__.py:<module>:d00fa24528d6e1395354",
    "module6/__init__.py:<module>:d774c65856a732abe244",
    "module6/distributed.py:<module>:2861a58eae26014d852d",
    "module6/distributed.py:<module>:b54f0e9606e676c531e3",
    "module6/distributed.py:<module>:e21ea519f9b33e05f403",
    "module6/distributed.py:<module>:e2a4b277486fec63a232",
    "module6/distributed.py:_check_buffer:1c033af670a03fd3d2f3",
    "module6/distributed.py:chunk_bounds:fe20a7abdf859b81993f",
    "module6/distributed.py:np:f3c18ee6ad52382b48a0",
    "module6/distributed.py:ring_all_reduce:f606920532e46cf76060",
    "module6/half.py:<module>:1fad67cb4ad6e20c9d6a",
    "module6/half.py:<module>:9149d5a99f22969f7b98",
    "module6/half.py:<module>:a67641386ef23255912b",
    "module6/half.py:HALF:631a02bae8ca5729e411",
    "module6/half.py:bfloat16:1fb6b16377885258ef32",
    "module6/half.py:bfloat16_decode:974e06698d6e2ff31e18",
    "module6/half.py:bfloat16_encode:089e1648f9d04624036a",
    "module6/half.py:float16:dfbd80a9d40efcf38b43",
    "module6/half.py:ml_dtypes:b4686083a6933c0d5312",
    "module6/half.py:njit,prange:56b09412c7061734efa6",
    "module6/half.py:np:d1c370036b4c92f0a4a2",
)

GIVEN: dict[str, tuple[str, str]] = {
    "2.1": (
        "1 42 43 44 45 46 47 48 49 50 51 52 54 55 56 57 58 59 60 61 62 80 83 84 85 87 88",
        "0 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 36 37 38 "
        "39 40 41 53 63 64 65 66 67 68 73 74 75 76 77 78 79 81 82 89 90 91 92 93 94 95 96 "
        "97 98 99 100 101 102 103 104 105 106 107 108 109 110 111 112 113 114 115 116 117 "
        "118 134 138",
    ),
    "2.2": (
        "45 49 52 54 55 56 58 59 60 61 80 83 86",
        "13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 36 37 38 39 "
        "40 41 53 63 64 65 66 67 68 73 74 75 76 77 78 79 81 82 89 90 91 92 93 94 95 96 97 "
        "98 99 100 101 102 103 104 105 106 107 108 109 110 111 112 113 114 115 116 117 "
        "118 134 138",
    ),
    "2.3": (
        "19 69 70 71 72 94 97 98 103 104",
        "13 14 15 16 17 18 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 36 37 38 39 40 "
        "41 49 52 53 54 55 56 59 60 61 63 64 65 66 67 68 73 74 75 76 77 78 79 80 81 82 83 "
        "89 90 91 92 93 95 96 99 100 101 102 105 106 107 108 109 110 111 112 113 114 115 "
        "116 117 118 134 138",
    ),
    "3.1": (
        "1 3 11 12 42 46 55 56 61 119 121 122 123 124 129 130 131 132 133 135 136 137 139 "
        "140 142 143 146 147",
        "0 2 4 5 6 7 8 9 10 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 "
        "33 34 35 36 37 38 39 40 41 49 52 53 54 59 60 63 64 65 66 67 68 73 74 75 76 77 78 "
        "79 80 81 82 83 89 90 91 92 93 94 95 96 97 98 99 100 101 102 103 104 105 106 107 "
        "108 109 110 111 112 113 114 115 116 117 118 134 138",
    ),
    "3.2": (
        "1 3 11 12 42 46 55 56 61 119 120 121 122 123 124 125 129 130 131 132 133 136 137 "
        "139 140 141 142 145 147",
        "0 2 4 5 6 7 8 9 10 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 "
        "33 34 35 36 37 38 39 40 41 49 52 53 54 59 60 63 64 65 66 67 68 73 74 75 76 77 78 "
        "79 80 81 82 83 89 90 91 92 93 94 95 96 97 98 99 100 101 102 103 104 105 106 107 "
        "108 109 110 111 112 113 114 115 116 117 118 134 138",
    ),
    "3.3": (
        "55 56 61 119 123 126 127 128 129 130 135 136 139 142 144 147",
        "13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 36 37 38 39 "
        "40 41 49 52 53 54 59 60 63 64 65 66 67 68 73 74 75 76 77 78 79 80 81 82 83 89 90 "
        "91 92 93 94 95 96 97 98 99 100 101 102 103 104 105 106 107 108 109 110 111 112 "
        "113 114 115 116 117 118 134 138",
    ),
    "3.4": (
        "149 150 151 152",
        "13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 36 37 38 39 "
        "40 41 49 52 53 54 55 56 59 60 61 63 64 65 66 67 68 73 74 75 76 77 78 79 80 81 82 "
        "83 89 90 91 92 93 94 95 96 97 98 99 100 101 102 103 104 105 106 107 108 109 110 "
        "111 112 113 114 115 116 117 118 134 138 148",
    ),
    "4.1": (
        "159 160 161 162 163 167 168",
        "13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 36 37 38 39 "
        "40 41 49 52 53 54 55 56 59 60 61 63 64 65 66 67 68 73 74 75 76 77 78 79 80 81 82 "
        "83 89 90 91 92 93 94 95 96 97 98 99 100 101 102 103 104 105 106 107 108 109 110 "
        "111 112 113 114 115 116 117 118 134 138 153 154 155 156 157 158",
    ),
    "4.2": (
        "159 160 164 165 166 167 168",
        "13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 36 37 38 39 "
        "40 41 49 52 53 54 55 56 59 60 61 63 64 65 66 67 68 73 74 75 76 77 78 79 80 81 82 "
        "83 89 90 91 92 93 94 95 96 97 98 99 100 101 102 103 104 105 106 107 108 109 110 "
        "111 112 113 114 115 116 117 118 134 138 153 154 155 156 157 158",
    ),
    "5.5": (
        "1 19 42 46 48 50 55 56 57 61 70 72 94 97 98 103 104 179 180 181 182 183 184 185 "
        "186 187 188 189 190 191 192 193 194 195 196",
        "0 13 14 15 16 17 18 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 36 37 38 39 "
        "40 41 49 52 53 54 59 60 63 64 65 66 67 68 73 74 75 76 77 78 79 80 81 82 83 89 90 "
        "91 92 93 95 96 99 100 101 102 105 106 107 108 109 110 111 112 113 114 115 116 "
        "117 118 134 138 169 170 171 172 173 174 175 176 177 178",
    ),
    "6.1": (
        "203 204 205 206",
        "13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 36 37 38 39 "
        "40 41 49 52 53 54 55 56 59 60 61 63 64 65 66 67 68 73 74 75 76 77 78 79 80 81 82 "
        "83 89 90 91 92 93 94 95 96 97 98 99 100 101 102 103 104 105 106 107 108 109 110 "
        "111 112 113 114 115 116 117 118 134 138 197 198 199 200 201 202",
    ),
    "6.3": (
        "212 213 216 217",
        "13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33 34 35 36 37 38 39 "
        "40 41 49 52 53 54 55 56 59 60 61 63 64 65 66 67 68 73 74 75 76 77 78 79 80 81 82 "
        "83 89 90 91 92 93 94 95 96 97 98 99 100 101 102 103 104 105 106 107 108 109 110 "
        "111 112 113 114 115 116 117 118 134 138 197 198 207 208 209 210 211 214 215",
    ),
}
